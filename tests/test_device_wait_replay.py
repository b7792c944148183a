"""Device calls and replay. tests/histories/device_call_pending.json holds a device call
pending while the model took a step and answered, then the wait, the timeout and one more
step; tests/test_replay.py replays it with the current code, and this test runs the same task
live and replays its history. RECORD_HISTORIES=1 records the live run as that file."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Replayer

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.devices import DeviceRepository
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from tests.conftest import AgentRunner
from tests.support.helpers import start

HISTORIES = Path(__file__).parent / "histories"

DEVICE_AND_CLOUD = [
    {
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "notes.txt"}},
            {"name": "list_files", "arguments": {}},
        ]
    },
    {"text": "the device was away"},
]


async def test_a_device_call_history_replays(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    device_id = f"gone-{uuid.uuid4().hex[:6]}"
    async with resources.sessions() as db, db.begin():
        await DeviceRepository(db, tenant).register(device_id, ["read_file"])
    async with agent_worker(ScriptedProvider.from_data(DEVICE_AND_CLOUD), workspace) as queue:
        _, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device_id,
            device_tools=["read_file"],
            device_schedule_to_start_seconds=2,
        )
        result = await handle.result()
    assert result.status == "completed"
    history = await handle.fetch_history()
    if os.environ.get("RECORD_HISTORIES"):
        (HISTORIES / "device_call_pending.json").write_text(history.to_json())
    replayed = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replayed.replay_failure is None
