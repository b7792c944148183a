"""The loop does not wait for an absent device (no device process here at all, so each call
meets its schedule-to-start timeout): while a device call is pending the model is told so
and takes other steps; a final answer while one is pending waits for it and the model takes
one more step, told of the timeout; at most max_pending_device_calls are pending at once;
continue-as-new waits until none is pending, so no call's outcome is lost to a new run."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.activities.providers.base import ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import agentctl, items_of, register_device, start

DEVICE_WAIT = 2  # seconds until an unserved device call is reported offline


async def registered_device(res: Resources, tenant: str, tools: list[str]) -> str:
    """A device that registered once and has not been seen for a while."""
    device_id = f"away-{uuid.uuid4().hex[:6]}"
    await register_device(res, tenant, device_id, tools, seen_ago_s=600)
    return device_id


async def asked(provider: ScriptedProvider, requests: int) -> None:
    """Until the model was asked `requests` times."""
    for _ in range(300):
        if len(provider.requests) >= requests:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the model was asked {len(provider.requests)} times, not {requests}")


def tool_message(request: ModelRequest, call_id: str) -> str:
    (text,) = [
        m.content for m in request.messages if m.role == "tool" and m.tool_call_id == call_id
    ]
    return text


def results(items: list[ItemRow], name: str) -> list[ItemRow]:
    return [i for i in items if i.kind == "tool_result" and i.tool_name == name]


async def run_task(
    client: Client,
    res: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    script: list[dict[str, Any]],
    **options: Any,
) -> tuple[ScriptedProvider, str, str, Any]:
    device_id = await registered_device(res, tenant, ["read_file"])
    provider = ScriptedProvider.from_data(script)
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client,
            res,
            queue,
            tenant=tenant,
            device_id=device_id,
            device_tools=["read_file"],
            device_schedule_to_start_seconds=DEVICE_WAIT,
            **options,
        )
        result = await handle.result()
    return provider, device_id, session_id, result


READ = {"name": "read_file", "arguments": {"path": "notes.txt"}}
LIST = {"name": "list_files", "arguments": {}}


async def test_a_final_answer_while_a_device_call_is_pending_waits_and_the_model_hears_the_timeout(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    script = [{"tool_calls": [READ]}, {"tool_calls": [LIST]}, {"text": "still waiting"}]
    provider, device_id, session_id, result = await run_task(
        client, resources, agent_worker, workspace, tenant, script
    )
    assert result.status == "completed"
    # Step 1 ran while the device call was pending, and the model was told so in our words.
    pending = tool_message(provider.requests[1], "call_0_0")
    assert pending.startswith(f"[pending on device {device_id} since step 0;"), pending
    assert tool_message(provider.requests[2], "call_0_0") == pending
    # The answer at step 2 did not end the task: the model took step 3 and read the timeout.
    assert len(provider.requests) == 4 and result.steps == 4
    told = tool_message(provider.requests[3], "call_0_0")
    assert f"device {device_id} is offline" in told, told
    items = await items_of(resources, tenant, session_id)
    (offline,) = results(items, "read_file")
    assert offline.data["error_type"] == "DeviceOffline"
    assert [i.kind for i in items][-1] == "assistant_message"
    assert str(items[-1].id) == result.final_item_id


async def test_device_calls_past_the_pending_limit_are_refused_and_the_model_is_told(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    second = {"name": "read_file", "arguments": {"path": "other.txt"}}
    script = [{"tool_calls": [READ, second]}, {"text": "waiting"}]
    provider, _, session_id, result = await run_task(
        client, resources, agent_worker, workspace, tenant, script, max_pending_device_calls=1
    )
    assert result.status == "completed"
    by_type = sorted(
        r.data["error_type"]
        for r in results(await items_of(resources, tenant, session_id), "read_file")
    )
    assert by_type == ["DeviceOffline", "DevicePendingLimit"]
    refused = tool_message(provider.requests[1], "call_0_1")
    assert "1 device call(s) are already pending" in refused, refused
    assert tool_message(provider.requests[1], "call_0_0").startswith("[pending on device")


async def test_continue_as_new_waits_while_a_device_call_is_pending(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    script = [{"tool_calls": [READ]}, {"tool_calls": [LIST]}, {"text": "waiting"}]
    provider, device_id, session_id, result = await run_task(
        client, resources, agent_worker, workspace, tenant, script, continue_as_new_every=1
    )
    assert result.status == "completed"
    (offline,) = results(await items_of(resources, tenant, session_id), "read_file")
    assert offline.data["error_type"] == "DeviceOffline"
    assert f"device {device_id} is offline" in tool_message(provider.requests[-1], "call_0_0")


async def test_cancel_while_a_device_call_is_pending_cancels_the_call(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    device_id = await registered_device(resources, tenant, ["read_file"])
    provider = ScriptedProvider.from_data([{"tool_calls": [READ]}, {"text": "waiting"}])
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, device_id=device_id, device_tools=["read_file"]
        )
        await asked(provider, 2)  # answered while the call is pending: the loop waits
        assert (await verbs.cancel(client, resources.sessions, tenant, session_id)).cancelled
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "cancelled"
    # The device call was cancelled with the task, not left behind on the device's queue.
    history = await handle.fetch_history()
    requested = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED
    ]
    assert len(requested) == 1


async def test_status_says_waiting_device_once_the_device_of_a_pending_call_is_away(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    await register_device(resources, tenant, device_id, ["read_file"])  # seen just now
    provider = ScriptedProvider.from_data([{"tool_calls": [READ]}, {"text": "waiting"}])
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, device_id=device_id, device_tools=["read_file"]
        )
        await asyncio.wait_for(asked(provider, 2), 60)  # answered: the loop waits for the call
        code, out, _ = await agentctl(capsys, "status", session_id)
        assert code == 0 and "workflow: step=" in out and " status=running" in out, out
        # Its heartbeats stop: the call it was offered is still pending.
        await register_device(resources, tenant, device_id, ["read_file"], seen_ago_s=600)
        code, out, _ = await agentctl(capsys, "status", session_id)
        assert code == 0 and re.search(r"workflow: step=\d+ status=waiting_device", out), out
        assert "status=running" not in out and f"waiting for device {device_id}" in out
        await verbs.cancel(client, resources.sessions, tenant, session_id)
        await asyncio.wait_for(handle.result(), 60)
