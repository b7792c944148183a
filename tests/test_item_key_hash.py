"""Items are unique on a 16-byte hash of (tenant, idempotency key), agent_artifacts.uri is
no longer written: lookups by key stay exact and tenant-scoped."""

from __future__ import annotations

import hashlib
import uuid

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.db import make_engine
from durable_agents.storage.items import _BY_KEY, ItemRepository, NewItem
from durable_agents.storage.models import ArtifactRow, ItemRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints


def msg(sid: uuid.UUID, key: str, text: str = "hi") -> NewItem:
    return NewItem(session_id=sid, kind="user_message", role="user", idempotency_key=key, text=text)


async def add_session(db: AsyncSession, tenant: str) -> uuid.UUID:
    sid = uuid.uuid4()
    async with db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={"m": 1})
    return sid


async def test_the_same_key_in_two_tenants_is_two_items_each_found_only_by_its_tenant(
    resources: Resources,
) -> None:
    key = f"agent-{uuid.uuid4()}:0:user"
    tenants = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    rows = {}
    async with resources.sessions() as db:
        for t in tenants:
            sid = await add_session(db, t)
            async with db.begin():
                row, created = await ItemRepository(db, t).append(msg(sid, key, text=t))
            assert created
            rows[t] = row.id
    async with resources.sessions() as db:
        for t in tenants:
            found = await ItemRepository(db, t).by_key(key)
            assert found is not None and (found.id, found.text) == (rows[t], t)
        assert await ItemRepository(db, "t-nobody").by_key(key) is None


async def test_lookups_by_key_use_the_hash_index_and_no_index_holds_the_key_text(
    resources: Resources, migrated: StackEndpoints, tenant: str
) -> None:
    # Every index of items leads with the tenant: for a tenant with no rows each of them
    # looks as cheap, and the planner's pick among equals is no evidence. A tenant with a few
    # hundred items (and fresh statistics, as autovacuum keeps them) is what a lookup meets.
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        await ItemRepository(db, tenant).append_many([msg(sid, f"k{n}") for n in range(400)])
    owner = make_engine(migrated.database_migration_url)
    try:
        async with owner.begin() as conn:  # committed: statistics roll back with a transaction
            await conn.execute(text("ANALYZE items"))
    finally:
        await owner.dispose()
    async with resources.sessions() as db:
        defs = list(
            await db.scalars(
                text(
                    "SELECT indexdef FROM pg_indexes "
                    "WHERE schemaname = 'public' AND tablename = 'items'"
                )
            )
        )
        hashed = [d for d in defs if "UNIQUE INDEX ux_items_key_hash" in d]
        assert (
            len(hashed) == 1 and "item_key_hash((tenant_id)::text, (idempotency_key)" in hashed[0]
        )
        # The text key stays in the row only: an index on it is the ~570 B a step we save.
        assert not [d for d in defs if "btree (idempotency_key)" in d]
        repo = ItemRepository(db, tenant)
        await db.execute(text("SET LOCAL enable_seqscan = off"))
        # Several keys (a batch append), and one key through the statement built once.
        for stmt in (
            select(ItemRow).where(repo._keyed(["a", "b"])),
            _BY_KEY.params(in_tenant=tenant, in_key="a"),
        ):
            compiled = stmt.compile(db.bind, compile_kwargs={"literal_binds": True})
            plan = "\n".join(await db.scalars(text(f"EXPLAIN {compiled}")))
            assert "ux_items_key_hash" in plan


async def test_item_key_hash_is_sha256_of_the_length_prefixed_tenant_and_key(
    resources: Resources,
) -> None:
    """The hash the index holds; the length prefix keeps ("a/b", "c") and ("a", "/bc") apart."""
    async with resources.sessions() as db:
        for tenant, key in [("a/b", "c"), ("a", "/bc"), ("t-ü", "k:1:ä")]:
            got = await db.scalar(text("SELECT item_key_hash(:t, :k)"), {"t": tenant, "k": key})
            raw = f"{len(tenant)}:{tenant}{key}".encode()
            assert got == uuid.UUID(bytes=hashlib.sha256(raw).digest()[:16])


async def test_new_artifact_rows_leave_the_uri_to_the_store(
    resources: Resources, tenant: str
) -> None:
    ref = await resources.store.put(tenant, f"uri {uuid.uuid4()}".encode(), "text/plain")
    async with resources.sessions() as db, db.begin():
        artifact_id = await register_uploaded(db, resources.store, ref, b"")
    async with resources.sessions() as db:
        row = await db.get(ArtifactRow, (artifact_id, tenant))
    assert row is not None and row.uri is None
    assert resources.store.uri(ref) == f"s3://{resources.store.bucket}/{ref.key}"


def _ref(tenant: str, sha: str) -> ArtifactRef:
    return ArtifactRef(
        tenant_id=tenant,
        sha256=sha,
        key=f"p/{tenant}/sha256/{sha}",
        size_bytes=1,
        content_type="text/plain",
    )
