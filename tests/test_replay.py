"""Workflow code stays deterministic: recorded histories replay without errors.

tests/histories/*.json were recorded from earlier versions of the loop; a change that
breaks replay of in-flight workflows fails here (use workflow.patched for such changes).
Set RECORD_HISTORIES=1 to (re)record the demo history after an intended change.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agents.activities.providers.offline import OfflineProvider
from durable_agents.workers.process.sandbox import runner_for
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support.helpers import copy_demo_workspace, run_approving, session_root, start

HISTORIES = Path(__file__).parent / "histories"


async def test_demo_history_replays_without_nondeterminism(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path
) -> None:
    sid = uuid.uuid4()
    copy_demo_workspace(session_root(workspace, "default", sid))
    async with agent_worker(OfflineProvider(), workspace) as queue:
        session_id, handle = await start(client, resources, queue, session_id=sid)
        await run_approving(client, resources, session_id, handle)
    history = await handle.fetch_history()
    if os.environ.get("RECORD_HISTORIES"):
        HISTORIES.mkdir(exist_ok=True)
        (HISTORIES / "demo.json").write_text(history.to_json())

    result = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert result.replay_failure is None


def recorded_workflow_id(path: Path, text: str) -> str:
    """The id the history ran under: a run with the start checks (one-door patch) checks
    it against its session, so replaying under another id would take another path."""
    try:
        started = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"]
        payload = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
        return workflow_id_for(str(payload["session_id"]))
    except (KeyError, IndexError, ValueError, TypeError):
        return path.stem


async def test_recorded_histories_replay_with_current_code() -> None:
    files = sorted(HISTORIES.glob("*.json"))
    assert files, "no recorded histories: run with RECORD_HISTORIES=1 once"
    # The SDK's strict sandbox (checks our modules' calls) and each one workers may run in.
    for runner in (SandboxedWorkflowRunner(), runner_for("shared"), runner_for("off")):
        replayer = Replayer(workflows=[AgentWorkflow], workflow_runner=runner)
        for path in files:
            text = path.read_text()
            history = WorkflowHistory.from_json(recorded_workflow_id(path, text), text)
            result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
            assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
