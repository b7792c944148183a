"""A peer SDK's agent with our plugin, its worker SIGKILLed mid-run: another worker finishes
the run, nothing is lost (every tool result reached the model; the answer counts them all),
and no reference dangles: every reference in the history names an object that exists,
hashes to its name and is held for the workflow."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai.durable_exec.temporal")
pytest.importorskip("temporalio.openai_agents")

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from durable_agents import ClaimCheckPlugin
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.claim_holds import holds_of
from durable_agents.workers.peers.claim_check import ClaimCheckCodec, ClaimCheckStore
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.peer_agents import ToolLoopModel, serving
from tests.support.processes import WorkerProcess

CALLS, RESULT_BYTES = 20, 20_000


def payloads_of(message: Message) -> Iterator[Payload]:
    """Every Payload anywhere in a history event."""
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values: Any = value.values()
        elif isinstance(value, Message):
            values = [value]
        else:
            values = value
        for v in values:
            if isinstance(v, Payload):
                yield v
            elif isinstance(v, Message):
                yield from payloads_of(v)


class RecordingCodec(ClaimCheckCodec):
    """Our codec, noting every object a decode read."""

    read: set[str] = set()

    async def _fetch(self, toks: Sequence[object]) -> list[bytes]:
        data = await super()._fetch(toks)
        RecordingCodec.read.update(str(tok).partition(":")[2] for tok in toks)
        return data


async def wait_for(proc: WorkerProcess, text: str, within: float = 60) -> None:
    async with asyncio.timeout(within):
        while text not in proc.log.read_text(errors="replace"):
            if proc.proc is None or proc.proc.poll() is not None:
                raise RuntimeError(f"worker exited:\n{proc.log.read_text()[-3000:]}")
            await asyncio.sleep(0.1)


@pytest.mark.parametrize("sdk", ["openai-agents", "pydantic-ai"])
async def test_worker_sigkill_mid_run_loses_nothing_and_leaves_no_dangling_reference(
    sdk: str,
    stack: StackEndpoints,
    migrated: StackEndpoints,
    resources: Resources,
    tenant: str,
    tmp_path: Path,
) -> None:
    model = ToolLoopModel(CALLS, RESULT_BYTES)
    queue = f"peer-kill-{uuid.uuid4().hex[:8]}"
    workflow_id = f"peer-kill-{sdk}-{uuid.uuid4().hex[:8]}"
    store = ClaimCheckStore(resources.store, resources.sessions)
    client = await Client.connect(
        stack.temporal_address, namespace="default", plugins=[ClaimCheckPlugin(tenant, store=store)]
    )
    async with serving(model):
        command = [sys.executable, "-m", "tests.support.peer_worker", sdk, queue, tenant, model.url]
        workers = [
            WorkerProcess(
                stack,
                queue=queue,
                workspace=tmp_path,
                script=[],
                log=tmp_path / f"worker{n}.log",
                command=command,
            )
            for n in range(2)
        ]
        first, second = workers
        try:
            first.start()
            await wait_for(first, "peer worker on")
            handle = await client.start_workflow(
                "OpenAIAgentWorkflow" if sdk == "openai-agents" else "PydanticAgentWorkflow",
                "read them all",
                id=workflow_id,
                task_queue=queue,
                result_type=str,
            )
            async with asyncio.timeout(60):
                while model.requests < CALLS // 2:
                    model.answered.clear()
                    await model.answered.wait()
            first.kill()  # mid-run: no cleanup, exactly like a lost machine
            killed_at = model.requests
            second.start()
            await wait_for(second, "peer worker on")
            answer = await asyncio.wait_for(handle.result(), 120)
        finally:
            for w in workers:
                w.stop()
    assert killed_at < CALLS
    assert answer == f"read {CALLS - 1} results"  # every result reached the model

    # Read the history as stored, then decode every payload in it with a fresh codec
    # (no cache): each reference must name an object that exists and hashes to its name.
    plain = await Client.connect(stack.temporal_address, namespace="default")
    history = await plain.get_workflow_handle(workflow_id).fetch_history()
    payloads = [p for event in history.events for p in payloads_of(event)]
    RecordingCodec.read = set()
    codec = RecordingCodec(
        ClaimCheckStore(resources.store, resources.sessions, read_cache_bytes=0), tenant
    )
    await codec.decode(payloads)
    assert len(RecordingCodec.read) >= CALLS - 1
    # ...and is held for this workflow, so GC keeps it while the history can be read.
    async with resources.sessions() as db:
        held = await holds_of(db, tenant, f"default/{workflow_id}")
        rows = await ArtifactRepository(db, tenant).get_many(h.artifact_id for h in held)
    assert RecordingCodec.read <= {row.sha256 for row in rows.values()}
    assert all(h.expires_at is None for h in held)
