"""Every hot table is keyed tenant first: primary, unique and foreign keys
lead with tenant_id, idempotency keys are unique per tenant, and a session id another
tenant holds is still refused."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from durable_agents.storage.compactions import CompactionRepository
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources

HOT_TABLES = (
    "sessions",
    "items",
    "turns",
    "compactions",
    "memories",
    "context_configs",
    "device_calls",
    "trajectory_outbox",
    "session_archives",
)

# Each primary, unique and foreign key of the table, with its columns in order.
_KEYS = text(
    """
    SELECT c.conname, c.contype,
           array_agg(a.attname::text ORDER BY k.n) AS cols
      FROM pg_constraint c
      CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
     WHERE c.conrelid = CAST(:rel AS regclass) AND c.contype IN ('p', 'u', 'f')
     GROUP BY c.conname, c.contype
    """
)


async def _session(res: Resources, tenant: str, sid: uuid.UUID) -> None:
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})


@pytest.mark.parametrize("table", HOT_TABLES)
async def test_every_key_of_a_hot_table_leads_with_the_tenant(
    resources: Resources, table: str
) -> None:
    async with resources.engine.connect() as conn:
        keys = (await conn.execute(_KEYS, {"rel": table})).all()
    assert keys, table
    not_leading = [(name, cols) for name, _, cols in keys if cols[0] != "tenant_id"]
    assert not_leading == []


async def test_the_same_compaction_key_in_two_tenants_stores_a_compaction_for_each(
    resources: Resources, tenant: str
) -> None:
    other = f"{tenant}-b"
    key = f"compact:{uuid.uuid4()}"
    stored = []
    for t in (tenant, other):
        sid = uuid.uuid4()
        await _session(resources, t, sid)
        async with resources.sessions() as db, db.begin():
            row, created = await CompactionRepository(db, t).add(
                sid,
                covers_through_ordinal=1,
                summary="s",
                summary_tokens=1,
                model="m",
                idempotency_key=key,
            )
        stored.append((row.tenant_id, created))
    assert stored == [(tenant, True), (other, True)]


async def test_a_session_id_another_tenant_holds_is_refused_as_missing(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    await _session(resources, tenant, sid)
    with pytest.raises(SessionNotFound):
        await _session(resources, f"{tenant}-b", sid)
    async with resources.sessions() as db:
        owners = list(
            await db.scalars(text("SELECT tenant_id FROM sessions WHERE id = :s"), {"s": sid})
        )
    assert owners == [tenant]
