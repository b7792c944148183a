"""The approvals inbox asks a waiting workflow for its pending calls once per change of the
session, not on every refresh (each query is a billable Temporal action), and still shows
each new wait as soon as the session changes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, update
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.models import SessionRow
from durable_agents.workers.gateway.context import Gateway
from durable_agents.workers.gateway.live_status import LiveStatusCache
from durable_agents.workers.gateway.routes_sessions import QUIET_RUNNING
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.client_contracts import AgentStatus
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key, poll, session_status
from tests.support.helpers import tenant_root

READ_THEN_WRITE = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "x"}}]},
]


def _row(sid: uuid.UUID, at: datetime) -> SessionRow:
    return SessionRow(id=sid, updated_at=at)


async def test_the_cache_asks_again_only_when_the_row_changes_or_ages() -> None:
    asked: list[str] = []

    async def query(sid: str) -> AgentStatus:
        asked.append(sid)
        return AgentStatus(session_id=sid, status="waiting_approval", step=len(asked))

    sid, other = uuid.uuid4(), uuid.uuid4()
    t0 = datetime.now(UTC)
    cache = LiveStatusCache(max_sessions=1)
    assert (await cache.get(_row(sid, t0), query)).step == 1
    assert (await cache.get(_row(sid, t0), query)).step == 1  # unchanged row: no query
    changed = await cache.get(_row(sid, t0 + timedelta(microseconds=1)), query)
    assert changed.step == 2 and cache.queries == 2
    await cache.get(_row(other, t0), query)  # over max_sessions: the first is forgotten
    await cache.get(_row(sid, t0 + timedelta(microseconds=1)), query)
    assert cache.queries == 4

    aged = LiveStatusCache(max_age_seconds=0)
    await aged.get(_row(sid, t0), query)
    await aged.get(_row(sid, t0), query)
    assert aged.queries == 2


def _gateway(http: httpx.AsyncClient) -> Gateway:
    transport = http._transport
    assert isinstance(transport, httpx.ASGITransport)
    gateway: Gateway = transport.app.state.gateway  # type: ignore[attr-defined]
    return gateway


async def _pending(http: httpx.AsyncClient, key: str) -> list[dict[str, Any]]:
    entries = (await http.get("/v1/approvals", headers=bearer(key))).json()["entries"]
    return [call for entry in entries for call in entry["pending"]]


async def test_refreshes_of_an_unchanged_inbox_query_no_workflow_and_a_new_wait_shows_at_once(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    (tenant_root(workspace, tenant) / "a.txt").write_text("alpha")
    key = await make_key(resources, tenant, "read", "start", "approve", user="erin")
    provider = ScriptedProvider.from_data(READ_THEN_WRITE)
    async with (
        agent_worker(provider, workspace, workspace_scope="tenant") as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        started = await http.post(
            "/v1/sessions",
            json={
                "text": "copy a to b",
                "max_steps": 5,
                "approval_policies": {"read_file": "always", "write_file": "always"},
            },
            headers=bearer(key),
        )
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        [first] = await poll(lambda: _pending(http, key), lambda p: len(p) == 1)
        assert first["name"] == "read_file"
        live = _gateway(http).live
        asked = live.queries
        for _ in range(5):
            assert await _pending(http, key) == [first]
        assert live.queries == asked  # five refreshes, no workflow query

        approved = await http.post(
            f"/v1/sessions/{sid}/calls/{first['tool_call_id']}/approve",
            json={},
            headers=bearer(key),
        )
        assert approved.status_code == 200, approved.text
        # The next wait shows well within the cache's age limit: the row changed.
        [second] = await poll(
            lambda: _pending(http, key),
            lambda p: [c["name"] for c in p] == ["write_file"],
            within_seconds=LiveStatusCache().max_age_seconds / 2,
        )
        assert live.queries > asked
        rejected = await http.post(
            f"/v1/sessions/{sid}/calls/{second['tool_call_id']}/reject",
            json={"reason": "no"},
            headers=bearer(key),
        )
        assert rejected.status_code == 200, rejected.text


async def test_a_waiting_session_whose_workflow_does_not_answer_is_listed_as_unanswered(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    """A page keeps the rows of an unanswered session (workers/gateway/web/js/inbox.js):
    its calls are not known to be decided, and an edit being typed in one must survive a
    refresh that found its worker busy."""
    (tenant_root(workspace, tenant) / "a.txt").write_text("alpha")
    key = await make_key(resources, tenant, "read", "start", "approve", user="erin")
    provider = ScriptedProvider.from_data(READ_THEN_WRITE)
    policies = {"read_file": "always"}
    async with (
        agent_worker(provider, workspace, workspace_scope="tenant") as queue,
        gateway_http(migrated, resources, client, queue=queue) as http,
    ):
        started = await http.post(
            "/v1/sessions",
            json={"text": "copy a", "max_steps": 5, "approval_policies": policies},
            headers=bearer(key),
        )
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        await poll(lambda: _pending(http, key), lambda p: len(p) == 1)
    # The worker is gone; a fresh gateway (nothing cached) asks the workflow, which cannot
    # answer within the inbox's wait.
    async with gateway_http(migrated, resources, client, queue=queue) as http:
        inbox = (await http.get("/v1/approvals", headers=bearer(key))).json()
    assert inbox["entries"] == [] and inbox["unanswered"] == [sid], inbox
    await client.get_workflow_handle(f"agent-{sid}").terminate("test over")


async def test_a_quiet_running_session_whose_run_waits_for_a_call_is_listed(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    """What a decision lost with the Temporal server leaves (tests/test_lost_decision_restart.py):
    AgentState says running, the run waits for the call. Quiet past QUIET_RUNNING, the
    session is asked, its call listed and decided from the inbox; a running one changed
    within it is not asked."""
    (tenant_root(workspace, tenant) / "a.txt").write_text("alpha")
    key = await make_key(resources, tenant, "read", "start", "approve", user="erin")
    provider = ScriptedProvider.from_data([READ_THEN_WRITE[0], {"content": "a read"}])
    async with (
        agent_worker(provider, workspace, workspace_scope="tenant") as queue,
        gateway_http(migrated, resources, client, queue=queue) as http,
    ):
        started = await http.post(
            "/v1/sessions",
            json={"text": "read a", "max_steps": 5, "approval_policies": {"read_file": "always"}},
            headers=bearer(key),
        )
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        [call] = await poll(lambda: _pending(http, key), lambda p: len(p) == 1)
        live = _gateway(http).live
        await _shows_running(resources, sid, quiet=timedelta(seconds=0))
        asked = live.queries
        assert await _pending(http, key) == []  # changed just now: not asked
        assert live.queries == asked
        await _shows_running(resources, sid, quiet=QUIET_RUNNING + timedelta(seconds=5))
        assert await _pending(http, key) == [call]

        approved = await http.post(
            f"/v1/sessions/{sid}/calls/{call['tool_call_id']}/approve", json={}, headers=bearer(key)
        )
        assert approved.status_code == 200, approved.text
        await poll(lambda: session_status(http, key, sid), lambda s: s == "completed")


async def _shows_running(res: Resources, sid: str, quiet: timedelta) -> None:
    async with res.sessions() as db, db.begin():
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id == uuid.UUID(sid))
            .values(status="running", updated_at=func.now() - quiet)
        )
