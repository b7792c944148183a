"""AgentWorkflow: the durable agent loop. Deterministic code only.

History holds ids, step cursors, tool call ids and ArtifactRefs; the conversation itself
lives in AgentState and is assembled inside the call_model activity.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from durable_agents.workflows.approval_waits import Waiting, check_waiting, pending_approvals
from durable_agents.workflows.budgets import raise_record, raised
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
    ModelCallInput,
    ModelCallResult,
    RaiseBudgetInput,
    RaiseBudgetResult,
    RejectInput,
    SendMessageInput,
    SessionStatusInput,
    TenantChangedInput,
    ToolCallRef,
)
from durable_agents.workflows.delegation import DELEGATE_TOOL, delegate
from durable_agents.workflows.device_waits import PendingDeviceCalls, refuse_over_limit
from durable_agents.workflows.empty_replies import NO_ANSWER, nudge
from durable_agents.workflows.model_calls import model_call_options, model_failure
from durable_agents.workflows.parks import Parks
from durable_agents.workflows.policies import step_key
from durable_agents.workflows.session_open import open_session, task_defaults
from durable_agents.workflows.start_checks import (
    check_identity,
    check_options,
    refused,
    update_refused,
)
from durable_agents.workflows.state_writes import write_state_in_task
from durable_agents.workflows.tool_calls import CallEnd, device_of, run_tool_call

with workflow.unsafe.imports_passed_through():
    # No I/O, enum values only: shared with the host, not re-imported per workflow.
    # Passed through: the activity classes only name the methods we schedule; their modules
    # (SQLAlchemy, aioboto3) must not be re-imported in every workflow sandbox.
    from durable_agents.activities.model_call import ModelActivities
    from durable_agents.activities.policies.task_rules import (
        InvalidTaskInput,
        check_decision,
        check_raise,
    )
    from durable_agents.activities.session_state import SessionStateActivities
    from durable_agents.vocabulary.session_status import SessionStatus


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        self._inp = inp
        self._step = inp.step
        self._status: str = SessionStatus.RUNNING
        self._waiting: dict[str, Waiting] = {}
        self._decided: set[str] = set()
        self._received = inp.received_messages
        self._seen = inp.seen_messages
        self._last_error: str | None = None
        self._compactions = Compactions(self._inp)
        self._devices_away = 0
        self._device_calls = PendingDeviceCalls()
        self._main: asyncio.Task[AgentResult] | None = None
        self._cancel_requested = False
        # Where admissions the gate did not let through wait: frozen, at a quota or budget.
        self._parks = Parks(inp.tenant_id, lambda: self._inp.budget(), self._park_status)

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
            await self._check_start()
            if self._inp.task_text is not None:  # a plain client's start: no command otherwise
                self._inp = self._inp.with_defaults(await open_session(self._inp))
            elif self._inp.unresolved():  # a plain start's run resumed
                self._inp = self._inp.with_defaults(await task_defaults(self._inp))
            await self._set_status(SessionStatus.RUNNING)
            return await self._loop()
        except asyncio.CancelledError:
            self._status = SessionStatus.CANCELLED
            self._device_calls.cancel_all()
            # Cancellation was delivered; activities started from here still run.
            await self._set_status(SessionStatus.CANCELLED, "cancelled by request", "cancelled")
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
            if self._step >= inp.step_limit():
                raise await self._fail(f"step limit of {inp.step_limit()} reached", "StepLimit")
            if self._should_continue_as_new():
                await self._compactions.settle(wait=True)
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._next_input())
            seen = self._received
            step = self._step
            try:
                result = await self._call_model(step)
            except ActivityError as err:
                if cancelled_activity(err):
                    raise asyncio.CancelledError from None
                raise await self._fail(model_failure(err, inp), "ModelFailed") from err
            if result.closed is not None:
                # Nothing was called or committed: once woken, the same step again.
                await self._parks.wait(result.closed)
                continue
            self._step += 1
            self._seen = seen
            final_item = result.item_id
            if result.tool_calls:
                await asyncio.gather(*(self._handle_call(step, c) for c in result.tool_calls))
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
            if result.empty_reply:
                if nudged_at == step - 1:  # the reply to the nudge was empty as well
                    return await self._no_answer(final_item)
                nudged_at = step
                await nudge(inp, step, self._key(step, "nudge"))
                continue
            break
        await self._compactions.settle(wait=True)
        self._status = SessionStatus.COMPLETED
        await self._set_status(SessionStatus.COMPLETED)
        return AgentResult(
            inp.session_id, SessionStatus.COMPLETED, self._step, final_item_id=final_item
        )

    async def _no_answer(self, final_item: str | None) -> AgentResult:
        await self._compactions.settle(wait=True)
        self._status, self._last_error = SessionStatus.NO_ANSWER, NO_ANSWER
        await self._set_status(SessionStatus.NO_ANSWER, NO_ANSWER, "no_answer")
        return AgentResult(
            self._inp.session_id,
            SessionStatus.NO_ANSWER,
            self._step,
            final_item,
            last_error=NO_ANSWER,
        )

    def _should_continue_as_new(self) -> bool:
        if self._step == self._inp.step:
            return False  # always make progress in a run first
        if self._device_calls:
            return False  # a pending call's task (and its timeout) lives in this run
        every = self._inp.continue_as_new_every
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

    async def _call_model(self, step: int) -> ModelCallResult:
        return await workflow.execute_activity_method(
            ModelActivities.call_model,
            ModelCallInput(
                session_id=self._inp.session_id,
                tenant_id=self._inp.tenant_id,
                step=step,
                idempotency_key=self._key(step, "model"),
                device_id=self._inp.device_id,
                pending_device_calls=self._device_calls.refs(),
                budget=self._inp.budget(),
                budget_session_id=self._inp.budget_root,
            ),
            **model_call_options(self._inp),
        )

    async def _park_status(self, status: str, note: str | None, suffix: str | None) -> None:
        # A cancel ends a park's wait as it ends any other (the loop's task is cancelled).
        self._status, self._last_error = status, note
        await self._set_status(status, note, suffix)

    # -- one tool call ------------------------------------------------------------------------

    async def _handle_call(self, step: int, call: ToolCallRef) -> None:
        key = self._key(step, call.tool_call_id)
        needs = call.needs_approval
        if needs and call.known and call.decision is not None:
            # A resumed run re-reads a step decided before: the decision stands, the person
            # is not asked twice (a rejection's result is committed already).
            self._decided.add(call.tool_call_id)
            if not call.decision:
                return
        elif needs and call.known and not await self._approved(step, call, key):
            return
        if call.name == DELEGATE_TOOL:
            await delegate(self._inp, step, call, key, self._parks)
            return
        device = device_of(self._inp, call)
        if device is not None:
            if len(self._device_calls) >= self._inp.max_pending_device_calls:
                self._last_error = await refuse_over_limit(self._inp, step, call, key, device)
                return
            # Started, not awaited: the loop goes on while the device is away.
            self._device_calls.start(
                call.tool_call_id, step, device, self._run_call(step, call, key)
            )
            return
        await self._run_call(step, call, key)

    async def _run_call(self, step: int, call: ToolCallRef, key: str) -> None:
        end = await self._admitted_run(step, call, key)
        # In doubt (an interrupted attempt may or may not have acted): run it again only
        # when a person approves, each time under a new key.
        rerun = end.rerun  # a resumed run goes on after the re-runs decided before
        while end.in_doubt:
            rerun += 1
            again = f"{key}:rerun{rerun}"
            if not await self._approved(step, call, again, rerun=rerun):
                break
            end = await self._admitted_run(step, call, again, rerun)
        if end.error is not None:
            self._last_error = end.error

    async def _admitted_run(
        self, step: int, call: ToolCallRef, key: str, rerun: int = 0
    ) -> CallEnd:
        """Run the call once the gate admits it (it parks the task meanwhile)."""
        while True:
            end = await run_tool_call(
                self._inp,
                step,
                call,
                key,
                device_away=self._device_away,
                device_back=self._device_back,
                rerun=rerun,
            )
            if end.closed is None:
                return end
            await self._parks.wait(end.closed)

    async def _device_away(self) -> None:
        self._devices_away += 1
        if self._devices_away == 1 and not self._waiting:
            await self._set_status(SessionStatus.WAITING_DEVICE)

    async def _device_back(self) -> None:
        self._devices_away -= 1
        running = self._status == SessionStatus.RUNNING
        if self._devices_away == 0 and not self._waiting and running:
            await self._set_status(SessionStatus.RUNNING)

    async def _approved(self, step: int, call: ToolCallRef, key: str, rerun: int = 0) -> bool:
        waiting = Waiting(call.name, step, rerun=rerun)
        # A re-run is decided by the call's id again, even if its first run was approved.
        self._decided.discard(call.tool_call_id)
        self._waiting[call.tool_call_id] = waiting
        if len(self._waiting) == 1:
            await self._set_status(SessionStatus.WAITING_APPROVAL)
        try:
            await workflow.wait_condition(
                lambda: waiting.approved is not None,
                timeout=timedelta(seconds=self._inp.approval_timeout_seconds),
            )
        except TimeoutError:
            waiting.approved, waiting.decided_by = False, "timeout"
            waiting.reason = f"no decision within {self._inp.approval_timeout_seconds:g}s"
        finally:
            del self._waiting[call.tool_call_id]
            self._decided.add(call.tool_call_id)
        record = waiting.record(self._inp, call.tool_call_id, key)
        await write_state_in_task(SessionStateActivities.record_approval, record)
        if not self._waiting and self._status == SessionStatus.RUNNING:
            await self._set_status(SessionStatus.RUNNING)
        return bool(waiting.approved)

    # -- handlers ---------------------------------------------------------------------------

    @workflow.update(name="approve")
    def approve(self, inp: ApproveInput) -> DecisionResult:
        self._waiting[inp.tool_call_id].decide(True, inp)
        return DecisionResult(inp.tool_call_id, True)

    @approve.validator
    def _validate_approve(self, inp: ApproveInput) -> None:
        self._validate_decision(inp)

    @workflow.update(name="reject")
    def reject(self, inp: RejectInput) -> DecisionResult:
        self._waiting[inp.tool_call_id].decide(False, inp)
        return DecisionResult(inp.tool_call_id, False)

    @reject.validator
    def _validate_reject(self, inp: RejectInput) -> None:
        self._validate_decision(inp)

    def _check_tenant(self, tenant_id: str | None) -> None:
        # A missing tenant is refused like a wrong one: no caller skips the check by omission.
        if tenant_id != self._inp.tenant_id:
            raise ApplicationError(
                "not a task of the caller's tenant (a request must name its own tenant)",
                type="TenantMismatch",
                non_retryable=True,
            )

    def _validate_decision(self, inp: ApproveInput | RejectInput) -> None:
        self._check_tenant(inp.tenant_id)
        try:
            check_decision(inp)
        except InvalidTaskInput as err:
            raise update_refused(err) from None
        check_waiting(self._waiting, self._decided, inp.tool_call_id)

    @workflow.update(name="raise_budget")
    async def raise_budget(self, inp: RaiseBudgetInput) -> RaiseBudgetResult:
        """New budget figures, recorded with who raised them; a task parked at its budget
        goes on with them."""
        parked = self._status == SessionStatus.BUDGET_EXHAUSTED
        update = workflow.current_update_info()
        await write_state_in_task(
            SessionStateActivities.record_budget_raise,
            raise_record(
                self._inp,
                inp,
                f"{workflow.info().workflow_id}:budget:{update.id if update else ''}",
            ),
        )
        self._inp = raised(self._inp, inp)
        self._parks.raised()
        i = self._inp
        return RaiseBudgetResult(
            i.session_id,
            resumed=parked,
            tokens=i.budget_tokens,
            cost_usd=i.budget_cost_usd,
            tool_calls=i.budget_tool_calls,
            seconds=i.budget_seconds,
        )

    @raise_budget.validator
    def _validate_raise_budget(self, inp: RaiseBudgetInput) -> None:
        self._check_tenant(inp.tenant_id)
        try:
            check_raise(inp)
        except InvalidTaskInput as err:
            raise update_refused(err) from None

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
        self._check_tenant(inp.tenant_id)

    @workflow.query(name="status")
    def status(self) -> AgentStatus:
        return AgentStatus(
            session_id=self._inp.session_id,
            status=SessionStatus.WAITING_APPROVAL
            if self._waiting
            else SessionStatus.WAITING_DEVICE
            if self._devices_away and self._status == SessionStatus.RUNNING
            else self._status,
            step=self._step,
            pending_approvals=pending_approvals(self._waiting),
            last_error=self._last_error,
        )

    async def _set_status(
        self, status: str, detail: str | None = None, suffix: str | None = None
    ) -> None:
        key = self._key(self._step, f"status:{suffix}") if suffix else None
        await write_state_in_task(
            SessionStateActivities.set_session_status,
            SessionStatusInput(
                self._inp.session_id,
                self._inp.tenant_id,
                status,
                detail,
                key,
                workflow_run_id=workflow.info().run_id,
            ),
        )

    async def _check_start(self) -> None:
        """Refuse a start no door accepts before the first command. Under another id nothing
        is written; a bad option of a session that exists marks it failed (never stuck)."""
        try:
            check_identity(self._inp, workflow.info().workflow_id)
        except InvalidTaskInput as err:
            if self._inp.task_text is not None and err.field == "workflow_id":
                # open_session writes nothing here: it says whether the id is taken.
                await open_session(self._inp)
            raise refused(err) from None
        try:
            check_options(self._inp)
        except InvalidTaskInput as err:
            if self._inp.task_text is not None:  # no session yet: nothing to mark
                raise refused(err) from None
            await self._fail(f"cannot run the task: {err}", "InvalidTaskInput")
            raise refused(err) from None

    async def _fail(self, message: str, error_type: str) -> ApplicationError:
        """Record the failure in AgentState; the caller raises what this returns."""
        self._status, self._last_error = SessionStatus.FAILED, message
        await self._set_status(SessionStatus.FAILED, message, error_type)
        return ApplicationError(message, type=error_type, non_retryable=True)
