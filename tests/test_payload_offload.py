"""Oversized payloads go to the artifact store instead of failing the workflow.

Unit tests drive the data converter against the real S3 of the test stack; end-to-end tests
run a tiny workflow on the real Temporal dev server, with and without offloading.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    # Passed through: the sandbox re-imports this module to load the test workflow, and
    # none of these may be re-imported inside it.
    import pytest
    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payload
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.sdk.v1 import ExternalStorageReference
    from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
    from temporalio.converter import DataConverter
    from temporalio.service import RPCError
    from temporalio.worker import Worker

    from durable_agents.storage.errors import ArtifactIntegrityError, ArtifactNotFound
    from durable_agents.workers.process.cloud import running
    from durable_agents.workers.process.payload_offload import (
        DRIVER_NAME,
        SYSTEM_TENANT,
        data_converter_with_offload,
    )
    from durable_agents.workers.resources import Resources
    from durable_agents.workers.stack import StackEndpoints
    from durable_agents.workers.temporal_client import connect_client
    from durable_agents.workflows.contracts import ArtifactRef

BIG = 3 * 1024 * 1024  # over the server's 2 MiB blob limit
HISTORY_BUDGET = 64 * 1024


def _blob(n: int) -> str:
    # Random, so no other test (or an earlier run) shares the content-addressed object.
    return os.urandom(n // 2 + 1).hex()[:n]


def _ref_of(payload: Payload) -> ArtifactRef:
    assert payload.metadata["encoding"] == b"json/protobuf"
    reference = json_format.Parse(payload.data, ExternalStorageReference())
    assert reference.driver_name == DRIVER_NAME
    c = reference.claim_data
    return ArtifactRef(
        c["tenant_id"], c["sha256"], c["key"], int(c["size_bytes"]), c["content_type"]
    )


# -- the converter ------------------------------------------------------------------------


async def test_round_trip_offloads_and_restores(resources: Resources) -> None:
    dc = data_converter_with_offload(resources.store, threshold_bytes=1024)
    value = {"text": _blob(50_000), "n": 7}
    [payload] = await dc.encode([value])
    assert payload.ByteSize() < 1024  # only the reference stays inline
    assert payload.external_payloads[0].size_bytes > 50_000
    ref = _ref_of(payload)
    assert ref.tenant_id == SYSTEM_TENANT
    assert await resources.store.exists(ref)
    assert await dc.decode([payload], [dict]) == [value]


async def test_small_payloads_pass_through(resources: Resources) -> None:
    dc = data_converter_with_offload(resources.store, threshold_bytes=1024)
    values = ["hello", {"ids": list(range(10))}]
    encoded = await dc.encode(values)
    assert encoded == await DataConverter.default.encode(values)
    assert all(not p.external_payloads for p in encoded)
    assert await dc.decode(encoded) == values


async def test_tampered_object_fails_decode(resources: Resources) -> None:
    store = resources.store
    dc = data_converter_with_offload(store, threshold_bytes=1024)
    [payload] = await dc.encode([_blob(20_000)])
    ref = _ref_of(payload)
    tampered = Payload(metadata={"encoding": b"json/plain"}, data=b'"not what was stored"')
    await store.client.put_object(  # as any other S3 client could
        Bucket=store.bucket, Key=ref.key, Body=tampered.SerializeToString()
    )
    with pytest.raises(ArtifactIntegrityError):
        await dc.decode([payload])


async def test_claim_cannot_point_outside_the_system_tenant(resources: Resources) -> None:
    dc = data_converter_with_offload(resources.store, threshold_bytes=1024)
    [payload] = await dc.encode([_blob(20_000)])
    reference = json_format.Parse(payload.data, ExternalStorageReference())
    reference.claim_data["tenant_id"] = "some-tenant"
    payload.data = json_format.MessageToJson(reference).encode()
    with pytest.raises(ArtifactNotFound):
        await dc.decode([payload])


# -- end to end on the dev server -----------------------------------------------------------


@activity.defn
async def big_result(size: int) -> str:
    return _blob(size)


@workflow.defn(name="PayloadOffloadProbe")
class PayloadOffloadProbe:
    """Returns the length of a big activity result ("activity") or of a big signal."""

    def __init__(self) -> None:
        self._blob: str | None = None

    @workflow.run
    async def run(self, mode: str) -> int:
        if mode == "activity":
            out = await workflow.execute_activity(
                big_result,
                BIG,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
            return len(out)
        await workflow.wait_condition(lambda: self._blob is not None)
        return len(self._blob or "")

    @workflow.signal
    def blob(self, data: str) -> None:
        self._blob = data


def _worker(client: Client, queue: str) -> Worker:
    return Worker(
        client, task_queue=queue, workflows=[PayloadOffloadProbe], activities=[big_result]
    )


async def _start(client: Client, queue: str, mode: str) -> WorkflowHandle[PayloadOffloadProbe, int]:
    return await client.start_workflow(
        PayloadOffloadProbe.run,
        mode,
        id=f"offload-{mode}-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        execution_timeout=timedelta(seconds=90),
    )


async def _history_bytes(handle: WorkflowHandle[PayloadOffloadProbe, int]) -> int:
    history = await handle.fetch_history()
    return sum(event.ByteSize() for event in history.events)


@pytest.fixture
async def offload_client(stack: StackEndpoints, resources: Resources) -> Client:
    return await connect_client(
        stack.temporal_address,
        "default",
        data_converter=data_converter_with_offload(resources.store),
    )


async def test_big_activity_result_and_signal_complete_with_offload(
    offload_client: Client,
) -> None:
    queue = f"offload-{uuid.uuid4().hex[:8]}"
    async with running(_worker(offload_client, queue)):
        by_activity = await _start(offload_client, queue, "activity")
        by_signal = await _start(offload_client, queue, "signal")
        await by_signal.signal(PayloadOffloadProbe.blob, _blob(BIG))
        assert await asyncio.wait_for(by_activity.result(), 60) == BIG
        assert await asyncio.wait_for(by_signal.result(), 60) == BIG
    # History holds references only: 3 MiB went to S3 twice, a few hundred bytes stayed.
    assert await _history_bytes(by_activity) < HISTORY_BUDGET
    assert await _history_bytes(by_signal) < HISTORY_BUDGET


async def test_without_offload_the_server_refuses_big_payloads(client: Client) -> None:
    queue = f"no-offload-{uuid.uuid4().hex[:8]}"
    async with running(_worker(client, queue)):
        by_activity = await _start(client, queue, "activity")
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(by_activity.result(), 60)
        by_signal = await _start(client, queue, "signal")
        # The server refuses the signal outright ("Blob data size exceeds limit.").
        with pytest.raises(RPCError, match=r"(?i)size exceeds limit"):
            await by_signal.signal(PayloadOffloadProbe.blob, _blob(BIG))
        await by_signal.terminate("control test done")
    history = await by_activity.fetch_history()
    failed = [
        e.activity_task_failed_event_attributes.failure.message
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    # The SDK core refuses to send the completion (TMPRL1103); an older core would let the
    # server reject it ("Complete result exceeds size limit"). Either way: size, limit.
    assert failed and re.search(r"(?i)size.*limit", failed[0]), failed
