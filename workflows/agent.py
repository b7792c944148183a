"""AgentWorkflow: the durable agent loop. Deterministic code only.

History holds ids, step cursors, tool call ids and ArtifactRefs; the conversation itself
lives in AgentState and is assembled inside the call_model activity.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from durable_agents.workflows.answer_checks import check_answer, check_failed_words
from durable_agents.workflows.approval_waits import (
    check_waiting,
    decide_when_waiting,
    pending_approvals,
)
from durable_agents.workflows.budgets import raised, record_raise
from durable_agents.workflows.call_runner import CallRunner
from durable_agents.workflows.cancels import cancelled_activity
from durable_agents.workflows.compactions import Compactions
from durable_agents.workflows.contracts import (
    AgentInput,
    AgentResult,
    AgentStatus,
    ApproveInput,
    CancelInput,
    CancelResult,
    DecisionResult,
    RaiseBudgetInput,
    RaiseBudgetResult,
    RejectInput,
    SendMessageInput,
    TenantChangedInput,
)
from durable_agents.workflows.device_waits import PendingDeviceCalls
from durable_agents.workflows.empty_replies import NO_ANSWER, nudge
from durable_agents.workflows.endings import Endings
from durable_agents.workflows.model_calls import call_model, model_failure
from durable_agents.workflows.parks import Parks
from durable_agents.workflows.policies import step_key
from durable_agents.workflows.progress import Progress
from durable_agents.workflows.session_open import open_session, task_defaults
from durable_agents.workflows.start_checks import check_start, check_update
from durable_agents.workflows.status_board import StatusBoard

with workflow.unsafe.imports_passed_through():
    # No I/O, enum values only: shared with the host, not re-imported per workflow.
    from durable_agents.activities.policies.task_rules import check_decision, check_raise
    from durable_agents.vocabulary.session_status import SessionStatus


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        self._inp = inp
        self._step = inp.step
        self._received = inp.received_messages
        self._seen = inp.seen_messages
        self._board = StatusBoard(lambda: self._inp, lambda: self._step)
        self._compactions = Compactions(self._inp)
        self._device_calls = PendingDeviceCalls()
        self._main: asyncio.Task[AgentResult] | None = None
        self._cancel_requested = False
        # Where admissions the gate did not let through wait: frozen, at a quota or budget.
        self._parks = Parks(inp.tenant_id, lambda: self._inp.settings.budget(), self._board.show)
        self._progress = Progress()
        self._calls = CallRunner(
            lambda: self._inp, self._board, self._parks, self._device_calls, self._progress
        )
        self._end = Endings(lambda: self._inp, self._board, self._compactions, lambda: self._step)

    # -- the loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        # The loop runs as a task of its own so the tenant-checked `cancel` update can stop
        # it; a cancellation from Temporal itself reaches it through this await as well.
        self._main = asyncio.create_task(self._run())
        try:
            return await self._main
        except asyncio.CancelledError:
            if not self._cancel_requested:
                raise
            return AgentResult(inp.session_id, SessionStatus.CANCELLED, self._step)

    async def _run(self) -> AgentResult:
        try:
            await check_start(self._inp, self._fail)
            if self._inp.task_text is not None:  # a plain client's start: no command otherwise
                self._inp = self._inp.with_defaults(await open_session(self._inp))
            elif self._inp.settings.unresolved():  # a plain start's run resumed
                self._inp = self._inp.with_defaults(await task_defaults(self._inp))
            await self._board.write(SessionStatus.RUNNING)
            return await self._loop()
        except asyncio.CancelledError:
            self._board.status = SessionStatus.CANCELLED
            self._device_calls.cancel_all()
            # Cancellation was delivered; activities started from here still run.
            await self._board.write(SessionStatus.CANCELLED, "cancelled by request", "cancelled")
            raise

    async def _loop(self) -> AgentResult:
        try:
            return await self._steps()
        except ActivityError as err:
            if cancelled_activity(err):  # a compaction (or a write) the loop awaited
                raise asyncio.CancelledError from None
            raise

    async def _steps(self) -> AgentResult:
        inp = self._inp
        final_item: str | None = None
        nudged_at: int | None = None
        while True:
            self._device_calls.check()
            await self._compactions.settle()
            if self._step >= inp.settings.step_limit():
                raise await self._fail(
                    f"step limit of {inp.settings.step_limit()} reached", "StepLimit"
                )
            if self._should_continue_as_new():
                await self._compactions.settle(wait=True)
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._next_input())
            seen = self._received
            step = self._step
            asked = self._parks.mark()
            try:
                refs = self._device_calls.refs()
                result = await call_model(self._inp, step, self._key(step, "model"), refs)
            except ActivityError as err:
                if cancelled_activity(err):
                    raise asyncio.CancelledError from None
                raise await self._fail(model_failure(err, inp), "ModelFailed") from err
            if result.closed is not None:
                # Nothing was called or committed: once woken, the same step again.
                await self._parks.wait(result.closed, asked)
                continue
            self._step += 1
            self._seen = seen
            final_item = result.item_id
            if result.tool_calls:
                self._progress.reply()
                await asyncio.gather(*(self._calls.handle(step, c) for c in result.tool_calls))
                self._progress.calls_done()
                if (stuck := self._progress.stuck(inp.settings.stuck_limit())) is not None:
                    return await self._end.ended(SessionStatus.STUCK, stuck, final_item)
                # A summary made now would cover a pending call but not its late result;
                # the next step that finds nothing pending compacts (it is still due).
                if result.compaction_due and not self._device_calls:
                    await self._compactions.start(step, self._key(step, "compact"))
                continue
            if self._received > self._seen:
                continue  # a follow-up arrived while the model was answering
            if self._device_calls:
                # An answer while device calls are pending is not the end: once one ends
                # (its result, or DeviceOffline) the model takes another step to see it.
                await self._device_calls.wait_any(
                    lambda: self._received > self._seen or self._cancel_requested
                )
                if self._cancel_requested:
                    # The cancel arrived as a model call completed, and the SDK returned
                    # the reply rather than the cancellation: honour it here, or the loop
                    # would wait for the device for as long as it may stay away.
                    raise asyncio.CancelledError
                continue
            if result.non_answer:
                if nudged_at == step - 1:  # the reply to the nudge was no answer either
                    return await self._end.ended(SessionStatus.NO_ANSWER, NO_ANSWER, final_item)
                self._progress.idle()
                if (stuck := self._progress.stuck(inp.settings.stuck_limit())) is not None:
                    return await self._end.ended(SessionStatus.STUCK, stuck, final_item)
                nudged_at = step
                await nudge(inp, step, self._key(step, "nudge"), result.non_answer)
                continue
            verdict = await check_answer(
                inp, step, result.item_id, self._key(step, "check"), unchecked=result.unchecked
            )
            if verdict.final():
                words = check_failed_words(verdict)
                return await self._end.ended(SessionStatus.CHECK_FAILED, words, final_item)
            if verdict.passed:
                return await self._end.completed(final_item, verdict.checked)

    def _should_continue_as_new(self) -> bool:
        if self._step == self._inp.step:
            return False  # always make progress in a run first
        if self._device_calls:
            return False  # a pending call's task (and its timeout) lives in this run
        every = self._inp.settings.continue_as_new_every
        if every and self._step - self._inp.step >= every:
            return True
        return workflow.info().is_continue_as_new_suggested()

    def _next_input(self) -> AgentInput:
        return self._inp.continued(
            step=self._step,
            seen_messages=self._seen,
            received_messages=self._received,
            compaction=self._compactions.latest,
        )

    def _key(self, step: int, suffix: str) -> str:
        return step_key(workflow.info().workflow_id, step, suffix)

    # -- handlers ---------------------------------------------------------------------------

    @workflow.update(name="approve")
    async def approve(self, inp: ApproveInput) -> DecisionResult:
        await decide_when_waiting(self._board.waiting, True, inp)
        return DecisionResult(inp.tool_call_id, True)

    @approve.validator
    def _validate_approve(self, inp: ApproveInput) -> None:
        self._validate_decision(inp)

    @workflow.update(name="reject")
    async def reject(self, inp: RejectInput) -> DecisionResult:
        await decide_when_waiting(self._board.waiting, False, inp)
        return DecisionResult(inp.tool_call_id, False)

    @reject.validator
    def _validate_reject(self, inp: RejectInput) -> None:
        self._validate_decision(inp)

    def _validate_decision(self, inp: ApproveInput | RejectInput) -> None:
        check_update(self._inp, inp, check_decision)
        check_waiting(self._board.waiting, self._board.decided, inp.tool_call_id)

    @workflow.update(name="raise_budget")
    async def raise_budget(self, inp: RaiseBudgetInput) -> RaiseBudgetResult:
        """New budget figures, recorded with who raised them; a task parked at its budget
        goes on with them."""
        parked = self._board.status == SessionStatus.BUDGET_EXHAUSTED
        await record_raise(self._inp, inp)
        self._inp = raised(self._inp, inp)
        self._parks.raised()
        s = self._inp.settings
        return RaiseBudgetResult(
            self._inp.session_id,
            resumed=parked,
            tokens=s.budget_tokens,
            cost_usd=s.budget_cost_usd,
            tool_calls=s.budget_tool_calls,
            seconds=s.budget_seconds,
        )

    @raise_budget.validator
    def _validate_raise_budget(self, inp: RaiseBudgetInput) -> None:
        check_update(self._inp, inp, check_raise)

    @workflow.signal(name="send_message")
    def send_message(self, inp: SendMessageInput) -> None:
        # A signal cannot be refused, so one from another tenant (or none) is ignored. The
        # message itself was committed under the sender's tenant, so it never reaches this
        # session's context either way; this only keeps a stranger from waking the loop.
        if inp.tenant_id != self._inp.tenant_id:
            workflow.logger.warning("send_message signal from another tenant ignored")
            return
        self._received += 1

    @workflow.signal(name="tenant_changed")
    def tenant_changed(self, inp: TenantChangedInput) -> None:
        """The tenant was thawed or its quotas changed: a parked step checks again."""
        self._parks.woken(inp.tenant_id)

    @workflow.update(name="cancel")
    def cancel(self, inp: CancelInput) -> CancelResult:
        """Stop the task: the loop records `cancelled` and the run ends."""
        if self._main is None or self._main.done() or self._cancel_requested:
            return CancelResult(self._inp.session_id, cancelled=False)
        self._cancel_requested = True
        self._main.cancel()
        return CancelResult(self._inp.session_id, cancelled=True)

    @cancel.validator
    def _validate_cancel(self, inp: CancelInput) -> None:
        check_update(self._inp, inp)

    @workflow.query(name="status")
    def status(self) -> AgentStatus:
        return AgentStatus(
            session_id=self._inp.session_id,
            status=self._board.live(),
            step=self._step,
            pending_approvals=pending_approvals(self._board.waiting),
            last_error=self._board.last_error,
            pending_devices=sorted({call.device_id for call in self._device_calls.refs()}),
        )

    async def _fail(self, message: str, error_type: str) -> ApplicationError:
        """Record the failure in AgentState; the caller raises what this returns."""
        await self._board.show(SessionStatus.FAILED, message, error_type)
        return ApplicationError(message, type=error_type, non_retryable=True)
