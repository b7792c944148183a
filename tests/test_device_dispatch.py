"""Device calls need no Temporal worker per device: a call is recorded in AgentState by one
cloud activity and completed asynchronously, so any gateway process serves any device. A
device long-polling one gateway is woken by the call's NOTIFY (not a per-process event),
completes through another gateway, and the result commits once however many gateways
are told."""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.device_calls import DeviceCallRepository
from durable_agents.workers.device_dispatch.calls import RECHECK_SECONDS
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.policies import device_task_queue
from tests.conftest import AgentRunner
from tests.support.device_gateway import make_device_key
from tests.support.gateway import bearer, gateway_server
from tests.support.helpers import items_of, start

READ_ON_DEVICE: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "done"},
]
BODY = b"what the device read"


@asynccontextmanager
async def _gateways(
    stack: StackEndpoints, res: Resources, client: Client, count: int
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """`count` gateway apps, each served on its own port with its own state (as separate
    processes would be), and a client for each."""
    settings = GatewaySettings(rate_per_second=1000, burst=1000)
    async with AsyncExitStack() as stack_:
        https = []
        for _ in range(count):
            url = await stack_.enter_async_context(
                gateway_server(
                    stack, res, client, queue="unused", workspace=Path("unused"), gateway=settings
                )
            )
            https.append(
                await stack_.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
            )
        yield https


async def _device_queue_pollers(client: Client, tenant: str, device_id: str) -> int:
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=device_task_queue(tenant, device_id)),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    return len(described.pollers)


async def test_a_call_offered_through_one_gateway_completes_through_another_once(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    auth = bearer(await make_device_key(resources, tenant, device_id))
    provider = ScriptedProvider.from_data(READ_ON_DEVICE)
    async with (
        agent_worker(provider, workspace) as queue,
        _gateways(migrated, resources, client, 2) as (first, second),
    ):
        registered = await first.post("/v1/device", json={"tools": ["read_file"]}, headers=auth)
        assert registered.status_code == 200, registered.text
        # The device waits on the first gateway before its call exists.
        poll = asyncio.create_task(
            first.post("/v1/device/calls/next", params={"wait": 25}, headers=auth)
        )
        await asyncio.sleep(0.5)
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device_id,
            device_tools=["read_file"],
        )
        began = time.monotonic()
        got = await poll
        woken_in = time.monotonic() - began
        assert got.status_code == 200, got.text
        offered = got.json()
        # Before: the gateway the device polled ran a Temporal worker on its queue.
        assert await _device_queue_pollers(client, tenant, device_id) == 0
        # Woken by the call's NOTIFY, not by the poll's periodic re-read.
        assert woken_in < RECHECK_SECONDS, woken_in

        cid = offered["call_id"]
        put = await second.put(offered["upload"]["url"], content=BODY)
        assert put.status_code == 200, put.text
        claim = {
            "size_bytes": len(BODY),
            "sha256": hashlib.sha256(BODY).hexdigest(),
            "content_type": "text/plain",
        }
        beat = await second.post(f"/v1/device/calls/{cid}/heartbeat", headers=auth)
        assert beat.status_code == 204, beat.text
        # The same result posted to both gateways at once (a retry racing the first).
        answers = await asyncio.gather(
            second.post(
                f"/v1/device/calls/{cid}/complete",
                json={"result": claim, "lease": offered["lease"]},
                headers=auth,
            ),
            first.post(
                f"/v1/device/calls/{cid}/complete",
                json={"result": claim, "lease": offered["lease"]},
                headers=auth,
            ),
        )
        statuses = sorted(a.json().get("status", a.status_code) for a in answers)
        assert statuses in (
            ["already_committed", "committed"],
            # The second one may find the staging object gone: refused, nothing committed.
            [409, "committed"],
            [422, "committed"],
        ), [a.text for a in answers]
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    committed = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    assert len(committed) == 1
    assert committed[0].data["artifact"]["sha256"] == hashlib.sha256(BODY).hexdigest()
    async with resources.sessions() as db:
        assert await DeviceCallRepository(db, tenant, device_id).waiting() == []
