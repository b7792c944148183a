"""The loop's side of one tool call the model asked for: its decision when its policy asks
for one (a person's, or the timeout's), then its run once the gate admits it — a sub-agent,
a device call in the background, or a call on the cloud queue — and, for an effectful call
found in doubt after a crash, a re-run only when a person approves it. Deterministic code."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

from durable_agents.workflows.approval_waits import Waiting
from durable_agents.workflows.contracts import AgentInput, ToolCallRef
from durable_agents.workflows.delegation import DELEGATE_TOOL, delegate
from durable_agents.workflows.device_waits import PendingDeviceCalls, refuse_over_limit
from durable_agents.workflows.parks import Parks
from durable_agents.workflows.policies import step_key
from durable_agents.workflows.progress import Progress
from durable_agents.workflows.state_writes import write_state_in_task
from durable_agents.workflows.status_board import StatusBoard
from durable_agents.workflows.tool_calls import CallEnd, device_of, run_tool_call

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.session_state import SessionStateActivities
    from durable_agents.vocabulary.session_status import SessionStatus


# The decision's record writes the status it leaves the session in (one local activity
# where there were two); runs recorded before it replay as they ran.
RECORD_WRITES_STATUS = "approval-record-writes-status"


class CallRunner:
    def __init__(
        self,
        inp: Callable[[], AgentInput],
        board: StatusBoard,
        parks: Parks,
        device_calls: PendingDeviceCalls,
        progress: Progress,
    ) -> None:
        """`inp`: the run's input now (a raise changes its budget); `progress` hears how
        each call ended."""
        self._inp = inp
        self._board = board
        self._parks = parks
        self._device_calls = device_calls
        self._progress = progress

    async def handle(self, step: int, call: ToolCallRef) -> None:
        """Decide, admit and run `call` of the reply at `step` (a device call: started)."""
        inp, board = self._inp(), self._board
        key = step_key(workflow.info().workflow_id, step, call.tool_call_id)
        needs = call.needs_approval
        if needs and call.known and call.decision is not None:
            # A resumed run re-reads a step decided before: the decision stands, the person
            # is not asked twice (a rejection's result is committed already).
            board.decided.add(call.tool_call_id)
            if not call.decision:
                return
        elif needs and call.known and not await self._approved(step, call, key):
            return
        if call.name == DELEGATE_TOOL:
            await delegate(inp, step, call, key, self._parks)
            return
        device = device_of(inp, call)
        if device is not None:
            if len(self._device_calls) >= inp.settings.max_pending_device_calls:
                board.last_error = await refuse_over_limit(inp, step, call, key, device)
                return
            # Started, not awaited: the loop goes on while the device is away.
            self._device_calls.start(call.tool_call_id, step, device, self._run(step, call, key))
            self._progress.call_ended(failed=False, repeats=0)  # under way is progress
            return
        await self._run(step, call, key)

    async def _run(self, step: int, call: ToolCallRef, key: str) -> None:
        end = await self._admitted(step, call, key)
        # In doubt (an interrupted attempt may or may not have acted): run it again only
        # when a person approves, each time under a new key.
        rerun = end.rerun  # a resumed run goes on after the re-runs decided before
        while end.in_doubt:
            rerun += 1
            again = f"{key}:rerun{rerun}"
            if not await self._approved(step, call, again, rerun=rerun):
                break
            end = await self._admitted(step, call, again, rerun)
        self._progress.call_ended(end.failed, end.repeats, end.unchanged)
        if end.error is not None:
            self._board.last_error = end.error

    async def _admitted(self, step: int, call: ToolCallRef, key: str, rerun: int = 0) -> CallEnd:
        """Run the call once the gate admits it (it parks the task meanwhile)."""
        while True:
            asked = self._parks.mark()
            end = await run_tool_call(
                self._inp(),
                step,
                call,
                key,
                device_away=self._board.device_away,
                device_back=self._board.device_back,
                rerun=rerun,
            )
            if end.closed is None:
                return end
            await self._parks.wait(end.closed, asked)

    async def _approved(self, step: int, call: ToolCallRef, key: str, rerun: int = 0) -> bool:
        """Wait for a decision on the call (the approve and reject updates fill it in, the
        task's approval timeout rejects it) and record it."""
        inp, board = self._inp(), self._board
        waiting = Waiting(call.name, step, rerun=rerun)
        # A re-run is decided by the call's id again, even if its first run was approved.
        board.decided.discard(call.tool_call_id)
        board.waiting[call.tool_call_id] = waiting
        if len(board.waiting) == 1:
            await board.write(SessionStatus.WAITING_APPROVAL)
        try:
            await workflow.wait_condition(
                lambda: waiting.approved is not None,
                timeout=timedelta(seconds=inp.settings.approval_timeout_seconds),
            )
        except TimeoutError:
            waiting.approved, waiting.decided_by = False, "timeout"
            waiting.reason = f"no decision within {inp.settings.approval_timeout_seconds:g}s"
        finally:
            del board.waiting[call.tool_call_id]
            board.decided.add(call.tool_call_id)
        record = waiting.record(inp, call.tool_call_id, key)
        resumes = not board.waiting and board.status == SessionStatus.RUNNING
        if workflow.patched(RECORD_WRITES_STATUS):
            if resumes:  # one local activity, one transaction
                record.status, record.workflow_run_id = board.status, workflow.info().run_id
            await write_state_in_task(SessionStateActivities.record_approval, record)
            return bool(waiting.approved)
        await write_state_in_task(SessionStateActivities.record_approval, record)
        if not board.waiting and board.status == SessionStatus.RUNNING:
            await board.write(SessionStatus.RUNNING)
        return bool(waiting.approved)
