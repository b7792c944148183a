"""When the loop compacts a session: beside the next model call, not before it.

A compaction is a model call of its own (the summary), seconds long with a hosted model, and
the step after it does not need it: compaction is due well before the context overflows,
and every model call assembles from the latest compaction committed. So the loop starts it
and goes on. One runs at a time; a step that still finds one due while it runs leaves it be.
The loop waits for it before continue-as-new (the next run starts from its ref) and before
the session ends; a compaction that failed fails the loop at its next step, as it did when
the loop waited for each one.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

from durable_agents.workflows.contracts import AgentInput, CompactInput, CompactionRef
from durable_agents.workflows.model_calls import model_call_options

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.compaction import CompactionActivities


class Compactions:
    def __init__(self, inp: AgentInput) -> None:
        self._inp = inp
        # The latest compaction this loop knows of: the next run starts from it.
        self.latest: CompactionRef | None = inp.compaction
        self._running: asyncio.Task[None] | None = None

    async def start(self, step: int, key: str) -> None:
        """Compact as of `step`, in the background unless one already runs."""
        if self._running is not None and not self._running.done():
            return
        await self.settle()  # a finished one's failure surfaces here at the latest
        self._running = asyncio.create_task(self._compact(step, key))

    async def settle(self, *, wait: bool = False) -> None:
        """Raise what a finished compaction raised; with `wait`, wait for one that runs."""
        task = self._running
        if task is None or not (wait or task.done()):
            return
        self._running = None
        await task

    async def _compact(self, step: int, key: str) -> None:
        ref = await workflow.execute_activity_method(
            CompactionActivities.compact_session,
            CompactInput(self._inp.session_id, self._inp.tenant_id, step, key),
            **model_call_options(self._inp),
        )
        if ref is not None:
            self.latest = ref
