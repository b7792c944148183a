"""The Temporal server dies while the loop records a person's approval: the record committed
in AgentState (a local activity, inside the workflow task that took the update), the task
never became history. After the restart the loop still waits for that call, so a person
rejects it: the rejection is what happens and what AgentState says, the lost approval kept
aside (tests/test_lost_decisions.py holds the record's rules). A private dev server, killed
with SIGKILL and started again on its own state; PostgreSQL and S3 are the suite's."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_call_refs import decision_of
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.workers.client import tasks
from durable_agents.workers.process.cloud import SHUTDOWN_GRACE_SECONDS, cloud_activities, running
from durable_agents.workers.process.plugin import AgentPlugin
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workers.stack.temporal import TemporalDevServer
from durable_agents.workers.temporal_client import connect_client
from durable_agents.workflows.contracts import ApprovalRecordInput, CommittedItem
from tests.support import verbs
from tests.support.helpers import start, status_of, wait_for_pending
from tests.support.tool_calls import call_items, set_aside_rows

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out/a.txt", "content": "A"}}]},
    {"content": "done"},
]


def _name(fn: Callable[..., Any]) -> str | None:
    defn = activity._Definition.from_callable(fn)
    return defn.name if defn is not None else None


def holding_after_record(acts: list[Any], recorded: asyncio.Event) -> list[Any]:
    """`acts` with record_approval committing its record, then holding its workflow task
    open (until the worker is stopped): the moment the server is killed in."""
    (real,) = [fn for fn in acts if _name(fn) == "record_approval"]

    @activity.defn(name="record_approval")
    async def record_then_hold(inp: ApprovalRecordInput) -> CommittedItem:
        committed: CommittedItem = await real(inp)
        recorded.set()
        await asyncio.Event().wait()
        return committed

    return [record_then_hold if fn is real else fn for fn in acts]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TemporalDevServer]:
    (tmp_path / "temporal").mkdir()
    temporal = TemporalDevServer(tmp_path / "temporal" / "temporal.db", port=0, fsync=False)
    temporal.start()
    try:
        yield temporal
    finally:
        temporal.stop(now=True)


async def test_a_rejection_after_the_server_lost_the_approval_is_the_decision(
    server: TemporalDevServer,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
) -> None:
    queue = f"lost-{uuid.uuid4().hex[:10]}"
    settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
    acts = cloud_activities(
        settings, resources, ScriptedProvider.from_data(SCRIPT), default_registry()
    )
    recorded = asyncio.Event()

    def worker(client: Client, activities: list[Any]) -> Worker:
        return Worker(
            client,
            task_queue=queue,
            plugins=[AgentPlugin(activities, sandbox="strict")],
            max_cached_workflows=0,
            graceful_shutdown_timeout=timedelta(seconds=0),
        )

    client = await connect_client(server.address, "default")
    ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
    held = worker(client, holding_after_record(acts, recorded))
    held_run = asyncio.create_task(held.run())
    try:
        session_id, _ = await start(
            client, resources, queue, tenant=tenant, approval_policies={"write_file": "always"}
        )
        assert await wait_for_pending(client, session_id, 30) == ["call_0_0"]
        approving = asyncio.create_task(
            verbs.approve(client, session_id, "call_0_0", "alice", **ours)
        )
        await asyncio.wait_for(recorded.wait(), 30)
        assert server.pid is not None
        os.killpg(server.pid, signal.SIGKILL)
        server.stop()
        # Down past the client's own retries: the update fails, as a crash's would.
        with pytest.raises(RPCError):
            await asyncio.wait_for(approving, 60)
        server.start()  # the held worker stops against a server it can reach
    finally:
        await held.shutdown()
        await asyncio.gather(held_run, return_exceptions=True)
        await asyncio.sleep(SHUTDOWN_GRACE_SECONDS)

    # What the lost task left: alice's approval on record, the session running.
    items = await call_items(resources, tenant, session_id, "call_0_0")
    assert decision_of(items) is True
    assert await status_of(resources, tenant, session_id) == "running"
    client = await connect_client(server.address, "default")
    async with running(worker(client, acts)):
        # The loop never took alice's approval: it still waits for a decision.
        assert await wait_for_pending(client, session_id, 30) == ["call_0_0"]
        decision = await verbs.reject(client, session_id, "call_0_0", "not now", "bob", **ours)
        result = await asyncio.wait_for(tasks.task_handle(client, session_id).result(), 60)

    assert not decision.approved and result.status == "completed"
    assert not (workspace / tenant / session_id / "out/a.txt").exists(), "the lost approval ran"
    items = await call_items(resources, tenant, session_id, "call_0_0")
    assert decision_of(items) is False
    assert [(i.kind, i.data.get("decided_by")) for i in items] == [
        ("tool_call", None),
        ("approval", "bob"),
        ("tool_result", None),
    ]
    assert "rejected by bob: not now" in items[2].text
    aside = await set_aside_rows(resources, tenant, session_id)
    assert [(r.kind, r.data["decided_by"]) for r in aside] == [("approval", "alice")]
