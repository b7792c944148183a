"""A device that is away while its call is pending, then comes back, through the real
gateway and a real key-only `agentctl device`: the loop keeps taking model steps while
the device is away, the call runs once the device is back, its result commits once, and the
model reads it (with its call) at its next step; a final answer given while the call was
pending waits for it, and the model takes one more step."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from durable_agents.activities.providers.base import ModelReply, ModelRequest, ProviderCall
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.devices import DeviceRepository
from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import GatewayDeviceProcess, gateway_server, make_device_key
from tests.support.helpers import decoded_payloads, items_of, start

NOTES = b"only on the laptop"
# How long the device stays away: the 60 s, shorter only where asked to.
AWAY_SECONDS = float(os.environ.get("DEVICE_AWAY_SECONDS", "20"))
DEVICE_CALL = "dev_read"


def tool_message(request: ModelRequest, call_id: str) -> str:
    (text,) = [
        m.content for m in request.messages if m.role == "tool" and m.tool_call_id == call_id
    ]
    return text


class PacedModel:
    """A fake model that asks the device for notes.txt, then lists the cloud workspace (one
    step per `pace` seconds, as a real model takes its time) until the device's result is
    in its context, and then answers."""

    name = "scripted"

    def __init__(self, pace: float) -> None:
        self.pace = pace
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 0:
            call = ProviderCall(DEVICE_CALL, "read_file", {"path": "notes.txt"})
            return ModelReply(text="", tool_calls=[call], finish_reason="tool_calls")
        if not tool_message(request, DEVICE_CALL).startswith("[pending"):
            return ModelReply(text="the notes are in")
        await asyncio.sleep(self.pace)
        call = ProviderCall(f"cloud_{turn}", "list_dir", {"path": ".", "recursive": turn % 2 == 0})
        return ModelReply(text="", tool_calls=[call], finish_reason="tool_calls")

    async def aclose(self) -> None:
        return None


async def away_device(res: Resources, tenant: str, tmp_path: Path) -> tuple[str, str, Path]:
    """A device (id, key, workspace) that registered once and is not running now."""
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    key = await make_device_key(res, tenant, device_id)
    async with res.sessions() as db, db.begin():
        await DeviceRepository(db, tenant).register(device_id, ["read_file"])
    device_ws = tmp_path / "laptop"
    device_ws.mkdir()
    (device_ws / "notes.txt").write_bytes(NOTES)
    return device_id, key, device_ws


async def answered(provider: ScriptedProvider, requests: int) -> None:
    for _ in range(300):
        if len(provider.requests) >= requests:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the model was asked {len(provider.requests)} times, not {requests}")


def device_results(items: list[ItemRow]) -> list[ItemRow]:
    return [i for i in items if i.kind == "tool_result" and i.tool_name == "read_file"]


async def test_the_loop_keeps_stepping_while_the_device_is_away_and_reads_its_late_result(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    device_id, key, device_ws = await away_device(resources, tenant, tmp_path)
    model = PacedModel(pace=0.5)
    async with (
        agent_worker(model, workspace) as queue,
        gateway_server(migrated, resources, client) as url,
    ):
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device_id,
            device_tools=["read_file"],
            max_steps=500,
            # Listing the same workspace while it waits is no progress: this test is of a
            # loop that keeps stepping, not of the stuck rule.
            stuck_after=500,
        )
        await asyncio.sleep(AWAY_SECONDS)
        steps_while_away = len(model.requests)
        device = GatewayDeviceProcess(url, key, device_ws, tmp_path / "device.log")
        device.start()
        try:
            result = await asyncio.wait_for(handle.result(), 180)
        finally:
            device.stop()
    print(f"{steps_while_away} model steps while the device was away {AWAY_SECONDS:g}s")
    assert result.status == "completed", result
    assert steps_while_away > 10
    # Every step before the result arrived was told the call is pending, in our words.
    told = [tool_message(r, DEVICE_CALL) for r in model.requests[1:steps_while_away]]
    assert all(t.startswith(f"[pending on device {device_id} since step 0;") for t in told)
    # The result committed once, and the model's last step read it with its call.
    items = await items_of(resources, tenant, session_id)
    (done,) = device_results(items)
    assert done.data["artifact"]["sha256"] == hashlib.sha256(NOTES).hexdigest()
    assert NOTES.decode() in tool_message(model.requests[-1], DEVICE_CALL)
    assert not tool_message(model.requests[-2], DEVICE_CALL).startswith(NOTES.decode())


async def test_a_final_answer_while_the_call_is_pending_waits_for_the_device(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    device_id, key, device_ws = await away_device(resources, tenant, tmp_path)
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "waiting for the laptop"},
    ]
    provider = ScriptedProvider.from_data(script)
    async with (
        agent_worker(provider, workspace) as queue,
        gateway_server(migrated, resources, client) as url,
    ):
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, device_id=device_id, device_tools=["read_file"]
        )
        await answered(provider, 2)  # the answer given while the call is pending
        await asyncio.sleep(2)  # the loop would have ended by now if it did not wait
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert len(provider.requests) == 2
        assert not device_results(await items_of(resources, tenant, session_id))
        device = GatewayDeviceProcess(url, key, device_ws, tmp_path / "device.log")
        device.start()
        try:
            result = await asyncio.wait_for(handle.result(), 120)
        finally:
            device.stop()
    assert result.status == "completed"
    assert len(provider.requests) == 3 and result.steps == 3
    assert NOTES.decode() in tool_message(provider.requests[2], "call_0_0")
    assert len(device_results(await items_of(resources, tenant, session_id))) == 1
    # History holds ids: neither the device's result nor our pending note is in it.
    payloads = decoded_payloads(await handle.fetch_history())
    assert NOTES.decode() not in payloads and "pending on device" not in payloads
