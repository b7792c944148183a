"""A wake that lands while the gate's answer is on its way ends the park that answer brings
(workflows/parks.py): an operator's thaw, quota change or raise is never lost to the time
between the gate's check and the park. Driven through a real worker and server: the probe
asks a stand-in gate (an activity the test holds open), receives the wake meanwhile, then
parks on the gate's closed answer."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents.workflows.gate_contracts import Closed, QuotaReached
from durable_agents.workflows.parks import Parks

TENANT = "t-parks"
RESETS_IN_SECONDS = 3.0
released = asyncio.Event()


@activity.defn(name="park_probe_gate")
async def gate() -> Closed:
    """The gate's answer, given once the test lets it go: the quota is reached."""
    await released.wait()
    return Closed(quota=QuotaReached("tokens_per_day reached: 10 of 5", RESETS_IN_SECONDS))


@workflow.defn(name="ParkWakeProbe", sandboxed=False)
class ParkWakeProbe:
    def __init__(self) -> None:
        self.parks = Parks(TENANT, lambda: None, self._write)
        self.asked = False

    async def _write(self, status: str, note: str | None, suffix: str | None) -> None:
        return None

    @workflow.signal
    def tenant_changed(self, tenant_id: str) -> None:
        self.parks.woken(tenant_id)

    @workflow.query
    def asking(self) -> bool:
        return self.asked

    @workflow.run
    async def run(self, woken_before_asking: bool) -> float:
        """Seconds parked on the gate's closed answer."""
        if woken_before_asking:
            await workflow.wait_condition(lambda: self.parks.mark().wakes > 0)
        asked = self.parks.mark()
        self.asked = True
        closed = await workflow.execute_activity(
            gate, start_to_close_timeout=timedelta(seconds=60), result_type=Closed
        )
        start = workflow.now()
        await self.parks.wait(closed, asked)
        return (workflow.now() - start).total_seconds()


async def _parked_seconds(client: Client, woken_before_asking: bool) -> float:
    released.clear()
    queue = f"parks-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[ParkWakeProbe], activities=[gate]):
        handle = await client.start_workflow(
            ParkWakeProbe.run,
            woken_before_asking,
            id=f"park-probe-{uuid.uuid4()}",
            task_queue=queue,
        )
        if woken_before_asking:
            await handle.signal(ParkWakeProbe.tenant_changed, TENANT)
        for _ in range(200):
            if await handle.query(ParkWakeProbe.asking):
                break
            await asyncio.sleep(0.05)
        if not woken_before_asking:
            # The gate has the question; the operator's change lands before its answer.
            await handle.signal(ParkWakeProbe.tenant_changed, TENANT)
            await asyncio.sleep(0.5)  # the signal's workflow task runs before the answer
        released.set()
        seconds = await asyncio.wait_for(handle.result(), 30)
    await asyncio.sleep(0.5)  # the worker's shutdown settles before the loop moves on
    return seconds


async def test_a_wake_while_the_gate_answers_ends_the_park_at_once(client: Client) -> None:
    assert await _parked_seconds(client, woken_before_asking=False) < 1.0


async def test_a_wake_before_the_gate_was_asked_does_not_end_its_park(client: Client) -> None:
    # The quota was still reached when the gate looked: the park lasts until it resets.
    assert await _parked_seconds(client, woken_before_asking=True) >= RESETS_IN_SECONDS
