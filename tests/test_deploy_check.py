"""`agentctl deploy check` on the real Temporal dev server: histories recorded by running
code are replayed against the code about to be deployed, and the runs it would break are
named (workers/process/deploy_check.py). docs/DEPLOY.md's command runs as written, its
query naming the test's task queue instead of the cloud worker's."""

from __future__ import annotations

import asyncio
import shlex
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.activities.providers.offline import OfflineProvider
from durable_agents.workers.process.cloud import CLOUD_WORKFLOWS
from durable_agents.workers.process.deploy_check import check_histories, workflow_name
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workflows.agent import AgentWorkflow
from tests.conftest import AgentRunner
from tests.support.deploy_probes import (
    ForeignAgentWorkflow,
    ProbeChanged,
    ProbeDeployed,
    ProbePatched,
)
from tests.support.doc_blocks import doc_block
from tests.support.helpers import (
    agentctl,
    copy_demo_workspace,
    run_approving,
    session_root,
    start,
)

RUNNER = UnsandboxedWorkflowRunner()


async def _until(ready: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(20):
        while not await ready():  # noqa: ASYNC110 (a server's state, not an event of ours)
            await asyncio.sleep(0.05)


async def _visible(client: Client, query: str, count: int) -> None:
    """Visibility is eventually consistent: wait until the runs are listed."""

    async def listed() -> bool:
        return (await client.count_workflows(query)).count >= count

    await _until(listed)


Handle = WorkflowHandle[Any, Any]


async def _probe_runs(
    client: Client, workflow: type, queue: str
) -> AsyncIterator[tuple[Handle, Handle]]:
    """One run left open (past its timer, waiting) and one run closed, on `queue`."""
    name = workflow_name(workflow)
    async with Worker(client, task_queue=queue, workflows=[workflow], workflow_runner=RUNNER):
        open_run = await client.start_workflow(
            name, id=f"probe-open-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        closed = await client.start_workflow(
            name, id=f"probe-closed-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        await closed.signal("finish")
        assert await closed.result() == "done"

        # Past the timer: the open run's history holds the command a changed deploy drops.
        async def timer_fired() -> bool:
            events = (await open_run.fetch_history()).events
            return any(e.HasField("timer_fired_event_attributes") for e in events)

        await _until(timer_fired)
        yield open_run, closed


@pytest.fixture
async def probes(client: Client) -> AsyncIterator[tuple[str, str, str]]:
    """(queue filter, open run's workflow id, closed run's workflow id)."""
    queue = f"deploy-{uuid.uuid4().hex[:10]}"
    async for open_run, closed in _probe_runs(client, ProbeDeployed, queue):
        where = f"TaskQueue = '{queue}'"
        await _visible(client, where, 2)
        yield where, open_run.id, closed.id
        await open_run.terminate()


async def test_histories_replay_clean_on_the_code_that_wrote_them(
    client: Client, probes: tuple[str, str, str]
) -> None:
    where, _, _ = probes
    report = await check_histories(
        client, [ProbeDeployed], closed_within=timedelta(hours=1), runner=RUNNER, extra_query=where
    )
    assert (report.replayed, report.broken) == (2, [])


async def test_a_change_behind_workflow_patched_replays_clean(
    client: Client, probes: tuple[str, str, str]
) -> None:
    where, _, _ = probes
    report = await check_histories(
        client, [ProbePatched], closed_within=timedelta(hours=1), runner=RUNNER, extra_query=where
    )
    assert (report.replayed, report.broken) == (2, [])


async def test_an_unpatched_change_names_every_run_it_would_break(
    client: Client, probes: tuple[str, str, str]
) -> None:
    where, open_id, closed_id = probes
    report = await check_histories(
        client, [ProbeChanged], closed_within=timedelta(hours=1), runner=RUNNER, extra_query=where
    )
    assert report.replayed == 2
    assert {b.workflow_id for b in report.broken} == {open_id, closed_id}
    assert {b.kind for b in report.broken} == {"nondeterminism"}
    assert all("\n" not in b.reason and b.reason for b in report.broken)


async def test_runs_closed_before_the_window_are_left_out(
    client: Client, probes: tuple[str, str, str]
) -> None:
    where, open_id, _ = probes
    later = datetime.now(UTC) + timedelta(days=1)
    report = await check_histories(
        client,
        [ProbeChanged],
        closed_within=timedelta(hours=1),
        runner=RUNNER,
        extra_query=where,
        now=later,
    )
    assert report.replayed == 1
    assert [b.workflow_id for b in report.broken] == [open_id]


async def test_agentctl_deploy_check_passes_a_loop_history_and_names_a_broken_one(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert AgentWorkflow in CLOUD_WORKFLOWS  # the worker's list is what is checked
    sid = uuid.uuid4()
    copy_demo_workspace(session_root(workspace, "default", sid))
    async with agent_worker(OfflineProvider(), workspace) as queue:
        session_id, handle = await start(client, resources, queue, session_id=sid)
        await run_approving(client, resources, session_id, handle)
    where = f"TaskQueue = '{queue}'"
    await _visible(client, where, 1)
    get_settings.cache_clear()

    documented = shlex.split(doc_block("docs/DEPLOY.md", "agentctl deploy check ").text)
    assert documented[:3] == ["agentctl", "deploy", "check"]
    argv = [where if a == "TaskQueue = 'agent-cloud'" else a for a in documented[1:]]
    assert argv != documented[1:] and "--namespace" in argv and "--limit" in argv
    code, out, err = await agentctl(capsys, *argv)
    assert (code, err) == (0, ""), out
    assert "replayed 1 run(s) of AgentWorkflow, ArtifactGcWorkflow" in out
    assert "BREAKS" not in out

    # A run under the loop's type name whose history the current loop cannot replay.
    other = f"deploy-{uuid.uuid4().hex[:10]}"
    async for open_run, closed in _probe_runs(client, ForeignAgentWorkflow, other):  # noqa: B007
        where = f"TaskQueue = '{other}'"
        await _visible(client, where, 2)
        code, out, _ = await agentctl(capsys, "deploy", "check", "--query", where)
        await open_run.terminate()
    assert code == 1, out
    assert f"BREAKS {open_run.id} run {open_run.result_run_id}" in out
    assert f"BREAKS {closed.id} run {closed.result_run_id}" in out
    assert "2 run(s) would break" in out


async def test_deploy_check_refuses_a_bad_window(
    cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = await agentctl(capsys, "deploy", "check", "--closed-within", "soon")
    assert code == 1 and "not a duration: 'soon'" in err
