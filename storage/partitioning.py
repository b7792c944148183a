"""AgentState hash-partitioned by tenant_id with PostgreSQL's declarative partitioning: the
key constraints a distributed PostgreSQL (Citus) needs, checked on one server.

`partition_by_tenant` turns each tenant-owned table of a freshly migrated, empty database
into `PARTITION BY HASH (tenant_id)` with `partitions` partitions, keeping every column,
default, key, check, index, foreign key, trigger and grant under its own name, so the
schema still matches the models and the repositories run unchanged. PostgreSQL refuses a
primary or unique key of a partitioned table that lacks the partition key: a key that is
not tenant-leading fails here, as it would fail to distribute.

For tests (`make test-partitioned`, tests/test_partitioned_schema.py); a production database
would be created partitioned or distributed (Citus: create_distributed_table(t, 'tenant_id')).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

# Partition i of every table is agentstate_p{i}.<table>, its indexes named as the parent's:
# the public schema (what the models and the schema test compare against) holds only the
# partitioned parents, and a plan names the same index on either schema. Reads and writes
# go through the parents, whose privileges are the ones checked.
PARTITION_SCHEMA_PREFIX = "agentstate_p"
# Read by key id before any tenant is known: a reference table, replicated, not distributed.
REFERENCE_TABLES = frozenset({"api_keys"})
ENV_FLAG = "AGENTSTATE_PARTITIONED"


@dataclass
class _Table:
    name: str
    keys: list[tuple[str, str]]  # primary, unique and check constraints: (name, definition)
    indexes: list[str]  # CREATE INDEX statements of indexes no constraint owns
    triggers: list[str]
    grants: list[tuple[str, str]]  # (privilege, grantee)


async def _tenant_tables(conn: AsyncConnection) -> list[str]:
    rows = await conn.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
            "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' "
            "AND a.attname = 'tenant_id' AND NOT a.attisdropped ORDER BY c.relname"
        )
    )
    return [r for (r,) in rows if r not in REFERENCE_TABLES]


async def _describe(conn: AsyncConnection, name: str) -> _Table:
    rel = {"rel": f"public.{name}"}
    keys = await conn.execute(
        text(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = CAST(:rel AS regclass) AND contype IN ('p', 'u', 'c') "
            "ORDER BY contype DESC, conname"
        ),
        rel,
    )
    indexes = await conn.execute(
        text(
            "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "WHERE i.indrelid = CAST(:rel AS regclass) AND NOT EXISTS "
            "(SELECT FROM pg_constraint k WHERE k.conindid = i.indexrelid "
            " AND k.conrelid = i.indrelid) ORDER BY i.indexrelid"
        ),
        rel,
    )
    triggers = await conn.execute(
        text(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = CAST(:rel AS regclass) AND NOT tgisinternal ORDER BY tgname"
        ),
        rel,
    )
    grants = await conn.execute(
        text(
            "SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' "
            "ELSE quote_ident(pg_get_userbyid(a.grantee)) END "
            "FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = CAST(:rel AS regclass)"
        ),
        rel,
    )
    return _Table(
        name,
        [(str(n), str(d)) for n, d in keys],
        [str(d) for (d,) in indexes],
        [str(d) for (d,) in triggers],
        [(str(p), str(g)) for p, g in grants],
    )


async def _foreign_keys(conn: AsyncConnection, tables: list[str]) -> list[tuple[str, str, str]]:
    """(table, name, definition) of every foreign key from or to one of `tables`."""
    rows = await conn.execute(
        text(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
            "FROM pg_constraint WHERE contype = 'f' AND (conrelid::regclass::text = ANY(:t) "
            "OR confrelid::regclass::text = ANY(:t)) ORDER BY conname"
        ),
        {"t": tables},
    )
    return [(str(t), str(n), str(d)) for t, n, d in rows]


async def _partition(conn: AsyncConnection, table: _Table, partitions: int) -> None:
    name = table.name
    await conn.execute(
        text(
            f'CREATE TABLE "{name}__hash" (LIKE "{name}" INCLUDING DEFAULTS INCLUDING GENERATED '
            "INCLUDING IDENTITY INCLUDING STORAGE INCLUDING COMPRESSION) "
            "PARTITION BY HASH (tenant_id)"
        )
    )
    await conn.execute(text(f'DROP TABLE "{name}"'))
    await conn.execute(text(f'ALTER TABLE "{name}__hash" RENAME TO "{name}"'))
    for i in range(partitions):
        await conn.execute(
            text(
                f'CREATE TABLE {PARTITION_SCHEMA_PREFIX}{i}."{name}" PARTITION OF public."{name}" '
                f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
            )
        )
    for key, definition in table.keys:
        await conn.execute(text(f'ALTER TABLE "{name}" ADD CONSTRAINT "{key}" {definition}'))
    for statement in (*table.indexes, *table.triggers):
        await conn.execute(text(statement))
    for privilege, grantee in table.grants:
        await conn.execute(text(f'GRANT {privilege} ON "{name}" TO {grantee}'))


async def _name_partition_indexes(conn: AsyncConnection) -> None:
    """Give each partition's index its parent's name (unique within its schema)."""
    rows = await conn.execute(
        text(
            "SELECT n.nspname, c.relname, p.relname FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE p.relkind = 'I' AND n.nspname LIKE :prefix AND c.relname <> p.relname"
        ),
        {"prefix": f"{PARTITION_SCHEMA_PREFIX}%"},
    )
    for schema, child, parent in rows.all():
        await conn.execute(text(f'ALTER INDEX {schema}."{child}" RENAME TO "{parent}"'))


async def partition_by_tenant(url: str, *, partitions: int = 4) -> list[str]:
    """Hash-partition every tenant-owned table of the empty database at `url` (as its
    owner) by tenant_id into `partitions` partitions; returns the tables partitioned.
    Tables partitioned already are left alone, so a second call changes nothing."""
    if partitions < 2:
        raise ValueError(f"partitions must be at least 2, got {partitions}")
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            names = await _tenant_tables(conn)
            if not names:
                return []
            tables = [await _describe(conn, n) for n in names]
            fks = await _foreign_keys(conn, names)
            for owner, fk, _ in fks:
                await conn.execute(text(f'ALTER TABLE {owner} DROP CONSTRAINT "{fk}"'))
            for i in range(partitions):
                await conn.execute(
                    text(f"CREATE SCHEMA IF NOT EXISTS {PARTITION_SCHEMA_PREFIX}{i}")
                )
            for table in tables:
                await _partition(conn, table, partitions)
            await _name_partition_indexes(conn)
            for owner, fk, definition in fks:
                await conn.execute(text(f'ALTER TABLE {owner} ADD CONSTRAINT "{fk}" {definition}'))
    finally:
        await engine.dispose()
    return names
