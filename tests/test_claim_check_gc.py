"""GC against the claim check's holds: a seeded random schedule of workflow starts and
signals carrying large strings (through the plugin, so their histories hold references),
closes, id reuse, uploads that crashed before their hold, time passing and GC passes (some
racing a signal), on the real Temporal dev server, PostgreSQL and S3.

Property: after every pass, every history Temporal still keeps (a run open, or closed less
than the namespace's retention ago) decodes, every reference in it naming a verified object.
Eventually, with every run closed and retention and the window passed, nothing is left."""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents import ClaimCheckPlugin
from durable_agents.activities.history_holds import retention_of, settle_history_holds
from durable_agents.storage.gc import collect
from durable_agents.workers.peers.claim_check import ENCODING, ClaimCheckCodec, ClaimCheckStore
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.helpers import s3_keys

WINDOW = timedelta(hours=1)


@workflow.defn(sandboxed=False)
class HoldingWorkflow:
    """Keeps what it is sent in its history until told to finish."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self, notes: list[str]) -> int:
        await workflow.wait_condition(lambda: self.done)
        return len(notes)

    @workflow.signal
    def note(self, text: str) -> None:
        pass

    @workflow.signal
    def finish(self) -> None:
        self.done = True


@dataclass
class World:
    client: Client  # with the plugin
    plain: Client  # without: reads histories as they are stored
    res: Resources
    tenant: str
    queue: str
    rng: random.Random
    retention: timedelta
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    runs: dict[str, list[str]] = field(default_factory=dict)  # workflow id -> run ids
    texts: list[str] = field(default_factory=list)

    def text(self) -> str:
        return self.rng.choice(self.texts)

    async def start(self, workflow_id: str | None = None) -> None:
        workflow_id = workflow_id or f"hold-{uuid.uuid4().hex[:8]}"
        handle = await self.client.start_workflow(
            HoldingWorkflow.run,
            [self.text() for _ in range(self.rng.randint(1, 3))],
            id=workflow_id,
            task_queue=self.queue,
        )
        assert handle.result_run_id
        self.runs.setdefault(workflow_id, []).append(handle.result_run_id)

    async def status(self, workflow_id: str) -> WorkflowExecutionStatus | None:
        return (await self.plain.get_workflow_handle(workflow_id).describe()).status

    async def open_ids(self) -> list[str]:
        return [w for w in self.runs if await self.status(w) == WorkflowExecutionStatus.RUNNING]

    async def signal(self) -> None:
        if ids := await self.open_ids():
            handle = self.client.get_workflow_handle(self.rng.choice(ids))
            await handle.signal(HoldingWorkflow.note, self.text())

    async def close(self) -> None:
        if ids := await self.open_ids():
            handle = self.client.get_workflow_handle(self.rng.choice(ids))
            await handle.signal(HoldingWorkflow.finish)
            await handle.result()

    async def reuse(self) -> None:
        closed = [w for w in self.runs if w not in await self.open_ids()]
        if closed:
            await self.start(self.rng.choice(closed))

    async def crash(self) -> None:
        """Uploaded, then the encoder died before its hold was written."""
        await self.res.store.put(self.tenant, self.text().encode(), "text/plain")

    async def gc(self) -> None:
        await settle_history_holds(self.res.sessions, self.plain, now=self.now, window=WINDOW)
        await collect(
            self.res.sessions, self.res.store, now=self.now, window=WINDOW, tenant_id=self.tenant
        )

    async def check_kept_histories_decode(self) -> None:
        # A fresh codec: nothing from a cache, every reference read from the store.
        codec = ClaimCheckCodec(
            ClaimCheckStore(self.res.store, self.res.sessions, read_cache_bytes=0), self.tenant
        )
        for workflow_id, run_ids in self.runs.items():
            for run_id in run_ids:
                handle = self.plain.get_workflow_handle(workflow_id, run_id=run_id)
                described = await handle.describe()
                close = described.close_time
                if close is not None and close + self.retention <= self.now:
                    continue  # Temporal deletes this history: nothing may read it
                history = await handle.fetch_history()
                payloads = [
                    p
                    for e in history.events
                    for p in (
                        *e.workflow_execution_started_event_attributes.input.payloads,
                        *e.workflow_execution_signaled_event_attributes.input.payloads,
                    )
                ]
                assert any(p.metadata.get("encoding") == ENCODING for p in payloads)
                await codec.decode(payloads)  # ArtifactNotFound if GC took one


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_gc_never_deletes_what_an_open_or_retained_history_references(
    stack: StackEndpoints, migrated: StackEndpoints, resources: Resources, tenant: str, seed: int
) -> None:
    # The collector's clock jumps past retention here, not the encoder's: it must not trust
    # a hold it wrote a moment ago in real time (workers/peers/claim_check.py, held_ttl_seconds).
    store = ClaimCheckStore(resources.store, resources.sessions, held_ttl_seconds=0)
    client = await Client.connect(
        stack.temporal_address, namespace="default", plugins=[ClaimCheckPlugin(tenant, store=store)]
    )
    plain = await Client.connect(stack.temporal_address, namespace="default")
    queue = f"holds-{uuid.uuid4().hex[:8]}"
    rng = random.Random(seed)
    world = World(client, plain, resources, tenant, queue, rng, await retention_of(plain))
    # Some texts shared between workflows (one object, several holds), most not (so a hold
    # lost shows as a missing object rather than being covered by another's).
    world.texts = [f"text {n} {seed} " + "z" * (5000 + 300 * n) for n in range(24)]
    # Temporal closes runs on its own clock, which does not jump: the collector's may run
    # ahead, but within retention, so every closed run stays retained (and must decode)
    # until the end, when the clock passes retention for all of them.
    step = [timedelta(minutes=10), 2 * WINDOW, 6 * WINDOW]
    horizon = world.now + world.retention - 2 * WINDOW
    async with Worker(
        client,
        task_queue=queue,
        workflows=[HoldingWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        await world.start()
        for _ in range(40):
            op = rng.choice(
                ["start", "signal", "signal", "close", "reuse", "crash", "advance", "gc", "race"]
            )
            if op == "start":
                await world.start()
            elif op == "signal":
                await world.signal()
            elif op == "close":
                await world.close()
            elif op == "reuse":
                await world.reuse()
            elif op == "crash":
                await world.crash()
            elif op == "advance":
                world.now = min(world.now + rng.choice(step), horizon)
            elif op == "race":
                await asyncio.gather(world.signal(), world.gc())
            else:
                await world.gc()
            await world.check_kept_histories_decode()

        # Eventually: every run closed, retention and the window passed twice: all collected.
        while await world.open_ids():
            await world.close()
        world.now = max(world.now, datetime.now(UTC) + world.retention + 2 * WINDOW)
        for _ in range(3):
            world.now += 2 * WINDOW
            await world.gc()
    assert await s3_keys(resources, f"{resources.store.prefix}/{tenant}/") == []
