"""The workflow sandbox the cloud worker runs in (workers/process/sandbox.py): shared, our
workflow modules are the host's (no per-run copy to hold in the cache or to re-import on a
replay); strict, a clock read in a module the workflow imports fails it."""

from __future__ import annotations

import ast
import asyncio
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.workflow import NondeterminismError

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.process.cloud import running
from durable_agents.workers.process.sandbox import (
    SHARED_WORKFLOW_MODULES,
    runner_for,
    workflow_runner,
)
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import AgentSettings
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import session_root, start, wait_for_pending
from tests.support.imports import imports, modules
from tests.support.sandbox_probe import ProbeInput, ProbeResult, SandboxProbe


async def _probe(
    client: Client, shared: Sequence[str] | WorkflowRunner, inp: ProbeInput
) -> ProbeResult:
    """Run the probe in the SDK's sandbox with `shared` passed through, or in a runner."""
    queue = f"sandbox-{uuid.uuid4().hex[:10]}"
    runner = shared if isinstance(shared, WorkflowRunner) else workflow_runner(shared)
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[SandboxProbe],
        workflow_runner=runner,
        # A sandbox refusal fails the run instead of retrying its task forever.
        workflow_failure_exception_types=[NondeterminismError],
    )
    async with running(worker):
        return await client.execute_workflow(
            SandboxProbe.run,
            inp,
            id=f"sandbox-probe-{uuid.uuid4().hex}",
            task_queue=queue,
        )


async def test_shared_runner_runs_the_hosts_workflow_modules_strict_a_copy(
    client: Client,
) -> None:
    host = id(sys.modules["durable_agents.workflows.contracts"])
    shared = await _probe(client, SHARED_WORKFLOW_MODULES, ProbeInput())
    assert shared.contracts_module_id == host
    strict = await _probe(client, (), ProbeInput())
    assert strict.contracts_module_id != host


async def test_strict_runner_fails_a_clock_read_in_an_imported_module(client: Client) -> None:
    with pytest.raises(WorkflowFailureError) as info:
        await _probe(client, (), ProbeInput(read_clock=True))
    assert "datetime" in str(info.value.cause)
    # What sharing gives up, shown rather than assumed: shared, the same read gets through.
    shared = (*SHARED_WORKFLOW_MODULES, "tests.support.sandbox_clock")
    assert (await _probe(client, shared, ProbeInput(read_clock=True))).clock


async def test_no_sandbox_runs_the_hosts_modules_like_the_shared_one(
    client: Client,
) -> None:
    """The default (AGENT_WORKFLOW_SANDBOX=off) runs the host's modules as the shared sandbox
    did, and a clock read gets through both; strict refuses it (the test above). What off
    gives up besides: the shared sandbox still refused `open`, `input` and `breakpoint`
    while an activation ran; the source check below covers those now."""
    host = id(sys.modules["durable_agents.workflows.contracts"])
    shared = (*SHARED_WORKFLOW_MODULES, "tests.support.sandbox_clock")
    off = runner_for("off")
    assert not isinstance(off, SandboxedWorkflowRunner)
    for runner in (shared, off):
        probed = await _probe(client, runner, ProbeInput(read_clock=True))
        assert probed.contracts_module_id == host and probed.clock
    assert isinstance(runner_for("shared"), SandboxedWorkflowRunner)
    assert isinstance(runner_for("strict"), SandboxedWorkflowRunner)


def _write(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": path}}]}


async def test_parked_session_evicted_from_the_cache_resumes_on_approval(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [], by_task={"first": [_write("out/first.md")], "second": [_write("out/second.md")]}
    )
    # The production sandbox and a one-run cache: parking the second session evicts the
    # first, so approving it replays its history on the shared modules.
    async with agent_worker(provider, workspace, max_cached_workflows=1, sandbox="off") as queue:
        ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
        opts: dict[str, Any] = {"tenant": tenant, "approval_policies": {"write_file": "always"}}
        first, first_handle = await start(client, resources, queue, "first", **opts)
        [first_call] = await wait_for_pending(client, first)
        second, second_handle = await start(client, resources, queue, "second", **opts)
        [second_call] = await wait_for_pending(client, second)
        await verbs.approve(client, first, first_call, "alice", **ours)
        await verbs.approve(client, second, second_call, "alice", **ours)
        results = await asyncio.wait_for(
            asyncio.gather(first_handle.result(), second_handle.result()), 60
        )
    assert [r.status for r in results] == ["completed", "completed"]
    for sid, name in ((first, "first"), (second, "second")):
        path = f"out/{name}.md"
        assert (session_root(workspace, tenant, sid) / path).read_text() == path


# What the strict sandbox would refuse at run time and, shared, nothing does: checked in the
# source of every shared workflow module instead (module imports and attribute reads).
_NONDETERMINISTIC_MODULES = {"os", "random", "secrets", "socket", "threading", "time"}
_NONDETERMINISTIC_NAMES = {
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("uuid", "uuid1"),
    ("uuid", "uuid4"),
}
_NONDETERMINISTIC_CALLS = {"now", "utcnow", "today", "uuid1", "uuid4", "urandom"}
# The builtins the SDK's sandbox refuses even in a shared module (thread-locally, while an
# activation runs); without a sandbox (the default) only this check stands.
_RESTRICTED_BUILTINS = {"open", "input", "breakpoint"}


def test_shared_workflow_modules_read_no_clock_or_randomness() -> None:
    shared = {
        name: path
        for name, path in modules().items()
        if name.startswith("durable_agents.workflows")
    }
    found: list[str] = []
    for name, path in sorted(shared.items()):
        for module, imported in imports(path):
            top = module.split(".")[0]
            if top in _NONDETERMINISTIC_MODULES or (module, imported) in _NONDETERMINISTIC_NAMES:
                found.append(f"{name} imports {module} {imported}".rstrip())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in _NONDETERMINISTIC_CALLS:
                found.append(f"{name}:{node.lineno} reads .{node.attr}")
            if isinstance(node, ast.Name) and node.id in _RESTRICTED_BUILTINS:
                found.append(f"{name}:{node.lineno} uses {node.id}")
    assert shared and not found


def test_sandbox_setting_takes_a_mode_and_refuses_the_old_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AGENT_WORKFLOW_SANDBOX", raising=False)
    monkeypatch.delenv("AGENT_STRICT_WORKFLOW_SANDBOX", raising=False)
    assert AgentSettings().workflow_sandbox == "off"
    monkeypatch.setenv("AGENT_WORKFLOW_SANDBOX", "strict")
    assert AgentSettings().workflow_sandbox == "strict"
    monkeypatch.setenv("AGENT_WORKFLOW_SANDBOX", "loose")
    with pytest.raises(ValidationError, match="'off', 'shared' or 'strict'"):
        AgentSettings()
    monkeypatch.delenv("AGENT_WORKFLOW_SANDBOX")
    # Set to what it used to mean, it is refused with the new name rather than ignored.
    monkeypatch.setenv("AGENT_STRICT_WORKFLOW_SANDBOX", "true")
    with pytest.raises(ValidationError, match="AGENT_WORKFLOW_SANDBOX=strict"):
        AgentSettings()
