"""Device calls and replay: a history recorded before device calls ran in the background
(the loop awaited the call) replays with the current code, and so does one recorded with a
call pending while the loop took other steps. RECORD_HISTORIES=1 re-records them."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Replayer

from activities.providers.scripted import ScriptedProvider
from storage.devices import DeviceRepository
from tests.conftest import AgentRunner
from tests.support.helpers import start
from workers.resources import Resources
from workflows.agent import AgentWorkflow

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
    name = os.environ.get("RECORD_DEVICE_HISTORY")
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
    if name:
        (HISTORIES / f"{name}.json").write_text(history.to_json())
    replayed = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replayed.replay_failure is None
