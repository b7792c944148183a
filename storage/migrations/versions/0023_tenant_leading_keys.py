"""Tenant-leading keys on every tenant-owned hot table, so AgentState can be distributed
(or hash-partitioned) by tenant_id: a distributed PostgreSQL such as Citus, and PostgreSQL's
own declarative partitioning, need every primary and unique key to include the distribution
key, and a foreign key to carry it too.

  primary keys      sessions, items, turns, context_configs, compactions, memories,
                    device_calls: (tenant_id, id); trajectory_outbox: (tenant_id, event_id)
  unique keys       items (tenant_id, session_id, ordinal), items
                    (tenant_id, item_key_hash(tenant_id, idempotency_key)), turns
                    (tenant_id, session_id, turn_no), compactions (tenant_id, session_id,
                    version) and (tenant_id, idempotency_key), memories (tenant_id,
                    idempotency_key): idempotency keys are unique per tenant
  foreign keys      every one between these tables names (tenant_id, ...) on both sides
  ix_sessions_id    sessions (id), not unique: the one lookup by id alone, a start refusing a
                    session id any tenant holds (storage.sessions.session_id_taken), reads it

Left as they are: api_keys (read by key id before the tenant is known: a reference table),
rate_limits (keyed by API key, no tenant). Every other table was tenant-leading already.

Online path (what this migration does, so it can run against a live database):
1. Outside a transaction, each new unique index is built with CREATE UNIQUE INDEX
   CONCURRENTLY (no lock that blocks writes; an INVALID leftover of an interrupted build is
   dropped CONCURRENTLY first, so a re-run starts clean). On a large table, run this step by
   hand ahead of the deploy with the same statements: IF NOT EXISTS makes the migration
   reuse the built indexes.
2. In one short transaction: the foreign keys are dropped, each old key is dropped and the
   new one attached with ALTER TABLE ... ADD CONSTRAINT ... PRIMARY KEY / UNIQUE USING INDEX
   (a catalog change: no scan, no rebuild), and the foreign keys come back NOT VALID (checked
   for new rows at once, no scan of old ones). Its ACCESS EXCLUSIVE locks are held for
   milliseconds; set lock_timeout so it fails rather than queues behind a long transaction.
3. Outside a transaction, ALTER TABLE ... VALIDATE CONSTRAINT per foreign key: a scan
   under SHARE UPDATE EXCLUSIVE, which does not block reads or writes.

Downgrade restores the id-only keys; it fails if two tenants have since used the same id or
idempotency key (the old keys cannot hold both rows).

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# (table, constraint, kind, old columns, new columns)
_KEYS: tuple[tuple[str, str, str, str, str], ...] = (
    ("sessions", "sessions_pkey", "PRIMARY KEY", "id", "tenant_id, id"),
    ("context_configs", "context_configs_pkey", "PRIMARY KEY", "id", "tenant_id, id"),
    ("turns", "turns_pkey", "PRIMARY KEY", "id", "tenant_id, id"),
    ("items", "items_pkey", "PRIMARY KEY", "id", "tenant_id, id"),
    ("compactions", "compactions_pkey", "PRIMARY KEY", "id", "tenant_id, id"),
    ("memories", "memories_pkey", "PRIMARY KEY", "id", "tenant_id, id"),
    ("device_calls", "device_calls_pkey", "PRIMARY KEY", "id", "tenant_id, id"),
    ("trajectory_outbox", "trajectory_outbox_pkey", "PRIMARY KEY", "event_id",
     "tenant_id, event_id"),
    ("items", "uq_items_session_ordinal", "UNIQUE", "session_id, ordinal",
     "tenant_id, session_id, ordinal"),
    ("turns", "uq_turns_session_no", "UNIQUE", "session_id, turn_no",
     "tenant_id, session_id, turn_no"),
    ("compactions", "uq_compactions_session_version", "UNIQUE", "session_id, version",
     "tenant_id, session_id, version"),
    ("compactions", "uq_compactions_idempotency_key", "UNIQUE", "idempotency_key",
     "tenant_id, idempotency_key"),
    ("memories", "uq_memories_idempotency_key", "UNIQUE", "idempotency_key",
     "tenant_id, idempotency_key"),
)  # fmt: skip

# (table, constraint, column, referenced table): each becomes (tenant_id, column) ->
# referenced (tenant_id, id).
_FKS: tuple[tuple[str, str, str, str], ...] = (
    ("sessions", "fk_sessions_parent", "parent_id", "sessions"),
    ("sessions", "fk_sessions_root", "root_id", "sessions"),
    ("items", "fk_items_session", "session_id", "sessions"),
    ("items", "fk_items_turn", "turn_id", "turns"),
    ("turns", "fk_turns_session", "session_id", "sessions"),
    ("turns", "fk_turns_config", "context_config_id", "context_configs"),
    ("compactions", "fk_compactions_session", "session_id", "sessions"),
    ("compactions", "fk_compactions_previous", "previous_compaction_id", "compactions"),
    ("memories", "fk_memories_supersedes", "supersedes_id", "memories"),
    ("session_archives", "fk_archives_session", "session_id", "sessions"),
)

_KEY_HASH_OLD = "item_key_hash(tenant_id, idempotency_key)"
_KEY_HASH_NEW = f"tenant_id, {_KEY_HASH_OLD}"


def _building(name: str) -> str:
    return f"{name}_0023"


def _concurrent_unique(name: str, table: str, columns: str) -> None:
    bind = op.get_bind()
    invalid = bind.exec_driver_sql(
        "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        f"WHERE c.relname = '{name}' AND NOT i.indisvalid"
    ).first()
    if invalid is not None:
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    op.execute(f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} ({columns})")


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for table, name, _, _, columns in _KEYS:
            _concurrent_unique(_building(name), table, columns)
        _concurrent_unique(_building("ux_items_key_hash"), "items", _KEY_HASH_NEW)
        op.execute("CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_sessions_id ON sessions (id)")
    for table, name, _, _ in _FKS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    # Unique keys before primary keys: nothing references them.
    for table, name, kind, _, _ in sorted(_KEYS, key=lambda k: k[2] != "UNIQUE"):
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} {kind} USING INDEX {_building(name)}"
        )
    op.execute("DROP INDEX ux_items_key_hash")
    op.execute(f"ALTER INDEX {_building('ux_items_key_hash')} RENAME TO ux_items_key_hash")
    for table, name, column, target in _FKS:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY (tenant_id, {column}) "
            f"REFERENCES {target} (tenant_id, id) NOT VALID"
        )
    with op.get_context().autocommit_block():
        for table, name, _, _ in _FKS:
            op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def downgrade() -> None:
    for table, name, _, _ in _FKS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for table, name, kind, columns, _ in sorted(_KEYS, key=lambda k: k[2] != "UNIQUE"):
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {kind} ({columns})")
    op.execute("DROP INDEX ux_items_key_hash")
    op.execute(f"CREATE UNIQUE INDEX ux_items_key_hash ON items ({_KEY_HASH_OLD})")
    op.execute("DROP INDEX ix_sessions_id")
    for table, name, column, target in _FKS:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({column}) "
            f"REFERENCES {target} (id)"
        )
