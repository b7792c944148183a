"""A worker takes on a new run only while an activity slot can run its next step
(workers/intake.py): the slot counts, the hold and its limit, and a real worker with one
activity slot leaving a backlog on the server instead of taking it into its cache."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from tests.conftest import AgentRunner
from tests.support.blocking import HeldProvider
from tests.support.helpers import start
from workers.intake import Intake
from workers.resources import Resources


async def _taken(intake: Intake, sticky: bool) -> asyncio.Task[None]:
    """A workflow-slot reservation under way, given a moment to take or wait."""
    task = asyncio.create_task(intake.take("workflow", sticky))
    await asyncio.sleep(0.05)
    return task


async def test_a_shared_poll_waits_while_every_activity_slot_runs() -> None:
    intake = Intake(workflow_slots=4, activity_slots=2, max_hold_seconds=60)
    for _ in range(2):
        assert intake.try_take("activity", sticky=False)
        intake.started("activity")
    assert not intake.try_take("activity", sticky=False)

    shared = await _taken(intake, sticky=False)
    sticky = await _taken(intake, sticky=True)
    assert sticky.done(), "a sticky poll serves runs in flight: it never waits on activities"
    assert not shared.done()
    assert intake.held_back == 1

    # The SDK core releases slots from its own threads.
    done = {"sticky": False, "ran": True}
    freeing = threading.Thread(target=intake.give_back, args=("activity",), kwargs=done)
    freeing.start()
    freeing.join()
    await asyncio.wait_for(shared, 5)
    assert intake.running_activities == 1


async def test_a_free_activity_slot_lets_one_shared_poll_in_not_every_one() -> None:
    """Each shared poll under way keeps a slot for the new run it may bring."""
    intake = Intake(workflow_slots=10, activity_slots=3, max_hold_seconds=60)
    for _ in range(2):
        assert intake.try_take("activity", sticky=False)
        intake.started("activity")
    first = await _taken(intake, sticky=False)
    second = await _taken(intake, sticky=False)
    assert first.done()
    assert not second.done()
    intake.give_back("workflow", sticky=False, ran=True)  # its task done, no run brought
    await asyncio.sleep(0.05)
    assert second.done()


async def test_polls_waiting_only_with_a_slot_do_not_close_the_gate() -> None:
    """Activity pollers reserve a slot before each poll: idle ones hold all of them here."""
    intake = Intake(workflow_slots=2, activity_slots=1, max_hold_seconds=60)
    assert intake.try_take("activity", sticky=False)
    await asyncio.wait_for(intake.take("workflow", sticky=False), 1)
    intake.give_back("activity", sticky=False, ran=False)
    assert intake.running_activities == 0


async def test_workflow_slots_bound_sticky_and_shared_polls_alike() -> None:
    intake = Intake(workflow_slots=2, activity_slots=1, max_hold_seconds=0.1)
    await intake.take("workflow", sticky=True)
    await intake.take("workflow", sticky=False)
    waiting = await _taken(intake, sticky=True)
    await asyncio.sleep(0.2)  # past the hold: the hold never lifts the workflow-slot bound
    assert not waiting.done()
    assert intake.held_back == 0, "waiting for a workflow slot is not holding a run back"
    intake.give_back("workflow", sticky=True, ran=True)
    await asyncio.wait_for(waiting, 5)


async def test_a_shared_poll_is_held_back_at_most_max_hold_seconds() -> None:
    """An evicted run's approval or cancellation comes through the shared queue too."""
    intake = Intake(activity_slots=1, max_hold_seconds=0.3)
    assert intake.try_take("activity", sticky=False)
    intake.started("activity")
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.wait_for(intake.take("workflow", sticky=False), 5)
    assert loop.time() - began >= 0.3
    assert intake.held_back == 1


async def test_a_cancelled_reservation_leaves_no_slot_taken() -> None:
    intake = Intake(workflow_slots=2, activity_slots=1, max_hold_seconds=60)
    assert intake.try_take("activity", sticky=False)
    intake.started("activity")
    waiting = await _taken(intake, sticky=False)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    intake.give_back("activity", sticky=False, ran=True)
    # Both workflow slots are still free, and no shared poll keeps an activity slot.
    await asyncio.wait_for(intake.take("workflow", sticky=False), 1)
    await asyncio.wait_for(intake.take("workflow", sticky=True), 1)


@pytest.mark.parametrize(
    ("slots", "message"),
    [
        ({"workflow_slots": 1}, "workflow_slots must be at least 2, got 1"),
        ({"activity_slots": 0}, "activity_slots must be at least 1, got 0"),
        ({"max_hold_seconds": -1}, "max_hold_seconds must be 0 or more, got -1"),
        ({"max_hold_seconds": float("nan")}, "max_hold_seconds must be 0 or more, got nan"),
    ],
)
def test_slot_counts_are_checked(slots: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Intake(**slots)  # type: ignore[arg-type]


async def _had_a_workflow_task(handle: WorkflowHandle[object, object]) -> bool:
    history = await handle.fetch_history()
    return any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED for e in history.events)


async def test_a_worker_leaves_new_runs_on_the_server_while_its_activity_slot_runs(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    release = asyncio.Event()
    provider = HeldProvider(release)
    intake = Intake(activity_slots=1, max_hold_seconds=60)
    async with agent_worker(provider, workspace, intake=intake, max_cached_workflows=50) as queue:
        _, first = await start(client, resources, queue, "Task 0.", tenant=tenant)
        await asyncio.wait_for(provider.entered.wait(), 30)
        later = [
            (await start(client, resources, queue, f"Task {i}.", tenant=tenant))[1]
            for i in range(1, 6)
        ]
        await asyncio.sleep(1.5)  # ungated, every run would have had its first task by now
        taken = [h for h in later if await _had_a_workflow_task(h)]  # type: ignore[arg-type]
        assert provider.calls == 1
        # Each shared poll already waiting on the server when the call began takes one run
        # (here 2, run after run); ungated, all 5 are taken.
        assert len(taken) <= 2, f"{len(taken)} of 5 runs taken on with the activity slot busy"
        assert intake.held_back >= 1
        release.set()
        results = await asyncio.gather(*(asyncio.wait_for(h.result(), 60) for h in [first, *later]))

    assert [r.status for r in results] == ["completed"] * 6
    assert provider.calls == 6
