"""Device calls the loop does not wait for: each runs as a task of its own while the loop
takes further model steps, and the model is told which calls are still pending (context
assembly gives each a note in our words). Deterministic workflow code only.

A late result is committed by the device path as before and given to the model with its
call (providers require a tool call's result right after it), at the next step. The loop
ends only when none is pending: a final answer while one is waits for one to end (a result
or DeviceOffline) and lets the model take another step. Continue-as-new and compaction
wait until none is pending, so a call's result is never lost to a new run or a summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from temporalio import workflow

from durable_agents.workflows.contracts import (
    AgentInput,
    PendingDeviceCall,
    ToolCallRef,
    ToolErrorInput,
)
from durable_agents.workflows.state_writes import write_state

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.session_state import SessionStateActivities

PENDING_LIMIT_ERROR = "DevicePendingLimit"


@dataclass
class _Pending:
    step: int
    device_id: str
    task: asyncio.Task[None]


class PendingDeviceCalls:
    """The device calls started and not yet ended, by tool call id."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._ended: list[asyncio.Task[None]] = []
        self.settled = 0

    def __len__(self) -> int:
        return len(self._pending)

    def start(
        self, tool_call_id: str, step: int, device_id: str, run: Coroutine[Any, Any, None]
    ) -> None:
        task = asyncio.create_task(self._settle(tool_call_id, run))
        self._pending[tool_call_id] = _Pending(step, device_id, task)

    async def _settle(self, tool_call_id: str, run: Coroutine[Any, Any, None]) -> None:
        try:
            await run
        finally:
            self._ended.append(self._pending.pop(tool_call_id).task)
            self.settled += 1

    def check(self) -> None:
        """Re-raise the failure of an ended call (a state write that gave up): nobody
        else awaits these tasks, and the loop must fail as it did when it awaited them."""
        ended, self._ended = self._ended, []
        for task in ended:
            if task.done() and not task.cancelled():
                task.result()

    async def wait_any(self, woken: Callable[[], bool]) -> None:
        """Until one pending call ends, or `woken()` (a follow-up message arrived)."""
        settled = self.settled
        await workflow.wait_condition(lambda: self.settled > settled or woken())
        self.check()

    def refs(self) -> list[PendingDeviceCall]:
        return [PendingDeviceCall(cid, p.step, p.device_id) for cid, p in self._pending.items()]

    def cancel_all(self) -> None:
        for pending in self._pending.values():
            pending.task.cancel()


async def refuse_over_limit(
    inp: AgentInput, step: int, call: ToolCallRef, key: str, device_id: str
) -> str:
    """Commit the model's answer to one device call too many: not run, and why."""
    limit = inp.settings.max_pending_device_calls
    message = (
        f"not run: {limit} device call(s) are already pending on device {device_id}, the "
        "limit for this task; call it again once one of their results has arrived"
    )
    await write_state(
        SessionStateActivities.record_tool_error,
        ToolErrorInput(
            inp.session_id,
            inp.tenant_id,
            step,
            call.tool_call_id,
            call.name,
            PENDING_LIMIT_ERROR,
            message,
            key,
        ),
    )
    return f"{call.name}: {message}"
