"""A tool call's items are read through the partial index that holds only tool-call items
however long the session: the read never walks the session's other items."""

from __future__ import annotations

import uuid

from sqlalchemy import text

from durable_agents.storage.items import _FOR_TOOL_CALL, ItemRepository
from tests.support.plan_db import (  # noqa: F401 (the `plan_db` fixture)
    PlanDb,
    analyze_items,
    plan_database,
)

ITEMS = 3000
EVERY = 10  # a call and its result in every EVERY items, ids as ours (`call_{step}_0`)


async def _long_session(resources: PlanDb, tenant: str) -> uuid.UUID:
    """A session of ITEMS items, then one more call whose result was committed first."""
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await db.execute(
            text(
                "INSERT INTO sessions (id, tenant_id, title, status, model_config, next_ordinal)"
                " VALUES (:s, :t, 't', 'running', '{}', :n)"
            ),
            {"s": sid, "t": tenant, "n": ITEMS + 3},
        )
        await db.execute(
            text(
                "INSERT INTO items (id, tenant_id, session_id, ordinal, kind, role, text, data,"
                " idempotency_key, tool_call_id)"
                " SELECT gen_random_uuid(), :t, :s, g, 'assistant_message', 'assistant', '',"
                " '{}', :k || ':' || g,"
                " CASE WHEN g % :every IN (1, 2) THEN 'call_' || (g / :every) || '_0' END"
                " FROM generate_series(1, :n) AS g"
            ),
            {"s": sid, "k": str(sid), "t": tenant, "n": ITEMS, "every": EVERY},
        )
        for ordinal, kind in ((ITEMS + 2, "tool_result"), (ITEMS + 1, "tool_call")):
            await db.execute(
                text(
                    "INSERT INTO items (id, tenant_id, session_id, ordinal, kind, role, text,"
                    " data, idempotency_key, tool_call_id) VALUES (gen_random_uuid(), :t, :s,"
                    " :o, :kind, 'tool', '', '{}', :key, 'call_last_0')"
                ),
                {"t": tenant, "s": sid, "o": ordinal, "kind": kind, "key": f"{sid}:{ordinal}"},
            )
    return sid


async def test_a_call_on_a_long_session_is_read_from_its_index_in_ordinal_order(
    plan_db: PlanDb, tenant: str
) -> None:
    resources = plan_db
    sid = await _long_session(resources, tenant)
    await analyze_items(resources)
    call = f"call_{ITEMS // EVERY // 2}_0"
    bound = _FOR_TOOL_CALL.params(in_session=sid, in_tenant=tenant, in_call=call)
    async with resources.sessions() as db:
        (indexdef,) = await db.scalars(
            text(
                "SELECT indexdef FROM pg_indexes "
                "WHERE schemaname = 'public' AND indexname = 'ix_items_session_tool_call'"
            )
        )
        repo = ItemRepository(db, tenant)
        rows = await repo.for_tool_call(sid, call)
        last = await repo.for_tool_call(sid, "call_last_0")
        compiled = bound.compile(db.bind, compile_kwargs={"literal_binds": True})
        plan = "\n".join(await db.scalars(text(f"EXPLAIN (ANALYZE, BUFFERS) {compiled}")))
    assert indexdef.endswith(
        "(tenant_id, session_id, tool_call_id) WHERE (tool_call_id IS NOT NULL)"
    )
    assert [r.ordinal for r in rows] == [ITEMS // 2 + 1, ITEMS // 2 + 2]
    assert [r.ordinal for r in last] == [ITEMS + 1, ITEMS + 2]  # sorted, not as stored
    # The planner's own choice on this database, nothing disabled. With an ORDER BY ordinal
    # it walked uq_items_session_ordinal here and threw away 2,998 of the 3,000 items.
    assert "ix_items_session_tool_call" in plan, plan
    assert "uq_items_session_ordinal" not in plan and "Removed by Filter" not in plan, plan
