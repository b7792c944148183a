"""What a task shows while its loop runs, and what AgentState records of it: the loop's
status and last error, the calls waiting for a person's decision, and the device calls
waiting for their device. Deterministic code only."""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

from durable_agents.workflows.approval_waits import Waiting
from durable_agents.workflows.contracts import AgentInput, SessionStatusInput
from durable_agents.workflows.policies import step_key
from durable_agents.workflows.state_writes import write_state_in_task

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.session_state import SessionStateActivities
    from durable_agents.vocabulary.session_status import SessionStatus


class StatusBoard:
    def __init__(self, inp: Callable[[], AgentInput], step: Callable[[], int]) -> None:
        """`inp`: the run's input now (a raise changes it); `step`: the loop's step now."""
        self._inp = inp
        self._step = step
        self.status: str = SessionStatus.RUNNING
        self.last_error: str | None = None
        # Calls waiting for a decision, by tool call id, and those decided in this run.
        self.waiting: dict[str, Waiting] = {}
        self.decided: set[str] = set()
        self._devices_away = 0

    def live(self) -> str:
        """The status a query answers: waiting on a person or a device shows as such."""
        if self.waiting:
            return SessionStatus.WAITING_APPROVAL
        if self._devices_away and self.status == SessionStatus.RUNNING:
            return SessionStatus.WAITING_DEVICE
        return self.status

    async def write(
        self,
        status: str,
        detail: str | None = None,
        suffix: str | None = None,
        *,
        checked: bool | None = None,
    ) -> None:
        """Record `status` in AgentState; with `suffix`, once per step under its own key,
        with `detail` as the error item it commits; `checked`: a completion's check."""
        inp = self._inp()
        key = (
            step_key(workflow.info().workflow_id, self._step(), f"status:{suffix}")
            if suffix
            else None
        )
        await write_state_in_task(
            SessionStateActivities.set_session_status,
            SessionStatusInput(
                inp.session_id,
                inp.tenant_id,
                status,
                detail,
                key,
                workflow_run_id=workflow.info().run_id,
                checked=checked,
            ),
        )

    async def show(self, status: str, note: str | None, suffix: str | None = None) -> None:
        """Become `status` with `note` as the last error, and record it."""
        self.status, self.last_error = status, note
        await self.write(status, note, suffix)

    async def device_away(self) -> None:
        self._devices_away += 1
        if self._devices_away == 1 and not self.waiting:
            await self.write(SessionStatus.WAITING_DEVICE)

    async def device_back(self) -> None:
        self._devices_away -= 1
        running = self.status == SessionStatus.RUNNING
        if self._devices_away == 0 and not self.waiting and running:
            await self.write(SessionStatus.RUNNING)
