"""Admission control for a cloud worker: take on a new workflow run only when an activity
slot is free to run its next step.

A worker polls two kinds of workflow task. Sticky ones belong to runs in its own cache:
runs in flight, finishing their steps. The shared queue's hold new runs, and runs no
worker holds any more. Left alone, the shared queue's pollers take new runs as fast as the
server hands them out, whatever the activity slots can run. Under a backlog, such as a burst
of starts, each new run's first model call then waits in the server's activity queue. Once
more runs wait than the workflow cache holds, each one is evicted before its activity
finishes and replayed from history when it comes back. That doubled the CPU of a park in
bench/parked_approvals.py at 3,000 and 10,000 sessions; docs/BENCHMARKS.md has the numbers.

So a reservation for a shared-queue poll waits while every activity slot is busy: running
a task, or kept for the run a shared-queue poll under way may bring (its first activity
starts as that poll's workflow task completes). The runs a worker has in flight then stay
near its activity slots plus its workflow slots: size the cache above that sum. Each
finished activity lets one more in. Sticky polls never wait
on activities, so runs in flight always finish, and the backlog stays on the server, where
other workers can take it. A shared-queue poll waits at most `max_hold_seconds`, though: it
also brings an evicted run its approval or cancellation, which must not wait for long
activities (a model outage holds every call for minutes). 0 never holds a poll back.

The SDK core calls these slot suppliers from its own threads as well as from the event
loop: counts are kept under a lock, and waiters are woken through their loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Literal

from temporalio.worker import (
    CustomSlotSupplier,
    FixedSizeSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
    WorkerTuner,
)

Kind = Literal["workflow", "activity"]

# The SDK's own defaults, which our workers used before they had a tuner.
DEFAULT_WORKFLOW_SLOTS = 100
DEFAULT_ACTIVITY_SLOTS = 100
DEFAULT_LOCAL_ACTIVITY_SLOTS = 100
DEFAULT_NEXUS_SLOTS = 100
# Long enough to outlast the gap between an activity finishing and the next one starting
# under a backlog; short enough for a person waiting on an evicted run.
DEFAULT_MAX_HOLD_SECONDS = 5.0


class Intake:
    """Workflow and activity slots of one worker, with shared-queue polls held back while
    every activity slot runs a task."""

    def __init__(
        self,
        *,
        workflow_slots: int = DEFAULT_WORKFLOW_SLOTS,
        activity_slots: int = DEFAULT_ACTIVITY_SLOTS,
        max_hold_seconds: float = DEFAULT_MAX_HOLD_SECONDS,
    ) -> None:
        # The SDK needs two workflow slots when it caches runs (a sticky and a shared poll).
        if workflow_slots < 2:
            raise ValueError(f"workflow_slots must be at least 2, got {workflow_slots}")
        if activity_slots < 1:
            raise ValueError(f"activity_slots must be at least 1, got {activity_slots}")
        if not max_hold_seconds >= 0:  # NaN too
            raise ValueError(f"max_hold_seconds must be 0 or more, got {max_hold_seconds}")
        self.max_hold_seconds = max_hold_seconds
        self.workflow_slots = workflow_slots
        self.activity_slots = activity_slots
        self._lock = threading.Lock()
        # Reserved: a poll waits with the slot, or a task runs in it.
        self._reserved = {"workflow": 0, "activity": 0}
        # Activity slots whose task runs. Not the reserved ones: each activity poller holds
        # one while it waits, and a poll returning nothing must not close the gate.
        self._running_activities = 0
        # Shared-queue workflow slots taken: each may bring a new run whose first activity
        # needs a slot, so they count against free activity slots until they are returned
        # (by then that activity runs, or waits on the server for one).
        self._shared = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        # Shared-queue polls that had to wait for an activity (for benches and tests).
        self.held_back = 0

    def tuner(self) -> WorkerTuner:
        """The worker's tuner: these workflow and activity slots, fixed local activity and
        Nexus slots."""
        return WorkerTuner.create_composite(
            workflow_supplier=_Supplier(self, "workflow"),
            activity_supplier=_Supplier(self, "activity"),
            local_activity_supplier=FixedSizeSlotSupplier(DEFAULT_LOCAL_ACTIVITY_SLOTS),
            nexus_supplier=FixedSizeSlotSupplier(DEFAULT_NEXUS_SLOTS),
        )

    @property
    def running_activities(self) -> int:
        with self._lock:
            return self._running_activities

    def _admits(self, kind: Kind, sticky: bool, *, held_long: bool = False) -> bool:
        """Under the lock."""
        if kind == "activity":
            return self._reserved["activity"] < self.activity_slots
        if self._reserved["workflow"] >= self.workflow_slots:
            return False
        busy = self._running_activities + self._shared
        return sticky or held_long or busy < self.activity_slots

    def _take(self, kind: Kind, sticky: bool) -> None:
        """Under the lock."""
        self._reserved[kind] += 1
        if kind == "workflow" and not sticky:
            self._shared += 1

    def try_take(self, kind: Kind, sticky: bool) -> bool:
        """Take a slot if one is free now (eager tasks; never waits)."""
        with self._lock:
            if not self._admits(kind, sticky):
                return False
            self._take(kind, sticky)
            return True

    async def take(self, kind: Kind, sticky: bool) -> None:
        """Wait for a slot of `kind` and take it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_hold_seconds
        counted = False
        while True:
            held_long = loop.time() >= deadline
            with self._lock:
                if self._admits(kind, sticky, held_long=held_long):
                    self._take(kind, sticky)
                    return
                if not counted and kind == "workflow" and not sticky:
                    counted = self._reserved["workflow"] < self.workflow_slots
                    self.held_back += counted
                waiter = (loop, loop.create_future())
                self._waiters.append(waiter)
            # Past the deadline only a workflow slot can be missing, and freeing one wakes us.
            timeout = None if held_long else max(deadline - loop.time(), 0.0)
            try:
                await asyncio.wait_for(waiter[1], timeout)
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)

    def started(self, kind: Kind) -> None:
        """A task now runs in a slot taken before."""
        if kind == "activity":
            with self._lock:
                self._running_activities += 1

    def give_back(self, kind: Kind, *, sticky: bool, ran: bool) -> None:
        """Return a slot taken with `sticky` (`ran`: a task ran in it) and let every waiter
        look again; there are only as many waiters as pollers."""
        with self._lock:
            self._reserved[kind] -= 1
            if kind == "workflow" and not sticky:
                self._shared -= 1
            if ran and kind == "activity":
                self._running_activities -= 1
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            # A closed loop's waiter is gone with it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, future)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Permit(SlotPermit):
    def __init__(self, sticky: bool) -> None:
        self.sticky = sticky
        self.ran = False


class _Supplier(CustomSlotSupplier):
    def __init__(self, intake: Intake, kind: Kind) -> None:
        self._intake = intake
        self._kind = kind

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        await self._intake.take(self._kind, ctx.is_sticky)
        return _Permit(ctx.is_sticky)

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        if not self._intake.try_take(self._kind, ctx.is_sticky):
            return None
        return _Permit(ctx.is_sticky)

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        permit = ctx.permit
        if isinstance(permit, _Permit) and not permit.ran:
            permit.ran = True
            self._intake.started(self._kind)

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        permit = ctx.permit
        if isinstance(permit, _Permit):
            self._intake.give_back(self._kind, sticky=permit.sticky, ran=permit.ran)
