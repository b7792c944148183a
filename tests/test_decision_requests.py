"""Staged decision requests (storage/decision_requests.py): taken only by their own tenant,
session and call, once; dropped when refused; swept when a client left one behind."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.decision_requests import (
    STALE_AFTER,
    DecisionRequestRow,
    sweep_stale_requests,
)
from durable_agents.workers.resources import Resources


async def test_a_request_is_taken_once_by_its_own_tenant_session_and_call(
    resources: Resources, tenant: str
) -> None:
    sid, other = uuid.uuid4(), uuid.uuid4()
    async with agent_state(resources.sessions, tenant, write=True) as st:
        rid = await st.requests.stage(sid, "call_0_0", {"decided_by": "ann", "reason": "no"})
    async with agent_state(resources.sessions, f"{tenant}-x", write=True) as st:
        assert await st.requests.take(rid, sid, "call_0_0") is None  # another tenant
    async with agent_state(resources.sessions, tenant, write=True) as st:
        assert await st.requests.take(rid, other, "call_0_0") is None
        assert await st.requests.take(rid, sid, "call_0_1") is None
        assert await st.requests.take(rid, sid, "call_0_0") == {"decided_by": "ann", "reason": "no"}
        assert await st.requests.take(rid, sid, "call_0_0") is None  # taken once


async def test_requests_left_behind_are_swept_and_fresh_ones_kept(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    async with agent_state(resources.sessions, tenant, write=True) as st:
        old = await st.requests.stage(sid, None, {"decided_by": "ann"})
        new = await st.requests.stage(sid, None, {"decided_by": "bo"})
        await st.db.execute(
            update(DecisionRequestRow)
            .where(DecisionRequestRow.id == old)
            .values(created_at=datetime.now(UTC) - STALE_AFTER - timedelta(minutes=1))
        )
    async with resources.sessions() as db, db.begin():
        assert await sweep_stale_requests(db, datetime.now(UTC)) >= 1
    async with agent_state(resources.sessions, tenant, write=True) as st:
        assert await st.requests.take(old, sid, None) is None
        assert await st.requests.take(new, sid, None) == {"decided_by": "bo"}
