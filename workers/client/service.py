"""The one application service: a method per verb (start, send, approve, reject, cancel,
resume, fork, replay, compare, raise a budget, freeze, thaw, set quotas), whichever door the
caller came in by.

Each verb: the caller's scope for it (commands.VERB_SCOPES), its input by the command
layer's rules (activities/policies/task_rules.py: types without coercion, sizes, ranges,
characters), the tenant bound once from the caller; then one AgentState unit of work, then
the Temporal call. agentctl, the gateway, the Python API and the demo are adapters of a few
lines over it. A refused request writes nothing: what a decision says beyond ids (a reason,
edited arguments) is staged (storage/decision_requests.py) and dropped if the loop refuses
the decision; a budget raise is recorded by the loop once it accepted it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.policies.admission import GateLimits, closed_now
from durable_agents.activities.policies.edited_arguments import call_schema, check_arguments
from durable_agents.activities.policies.task_rules import (
    BUDGET_FIGURES,
    InvalidTaskInput,
    check_budget_raise,
    check_decider,
    check_range,
    check_reason,
)
from durable_agents.activities.policies.text_limits import check_json_text, check_size, json_size
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.quotas import PARKED_STATUSES, TenantControls, tenant_default
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES, SessionStatus
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller, StartRequest, start_command
from durable_agents.workers.client.comparison import Comparison, compare_sessions
from durable_agents.workers.client.decisions import send_decision
from durable_agents.workers.client.forks import ForkRequest, fork_task
from durable_agents.workers.client.replays import (
    ReplayReport,
    ReplayRequest,
    replay_report,
    replay_task,
)
from durable_agents.workers.client.resume_point import resume_run
from durable_agents.workers.client.tenant_controls import TenantState, freeze, set_quotas, thaw
from durable_agents.workers.settings import Settings
from durable_agents.workers.task_options import MAX_STEPS
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import (
    AgentStatus,
    ApproveInput,
    CancelInput,
    CancelResult,
    DecisionResult,
    RaiseBudgetInput,
    RaiseBudgetResult,
    RejectInput,
    TaskBudget,
)
from durable_agents.workflows.parks import park_of

RAISABLE = tuple(name for name, _, _ in BUDGET_FIGURES)
# Where a task waits for the gate (workflows/parks.py) rather than for a person.
_GATE_PARKS = tuple(s for s in PARKED_STATUSES if s != SessionStatus.WAITING_APPROVAL)
T = TypeVar("T")


class TaskService:
    """Every verb, for callers of one deployment (its Temporal client, AgentState, store and
    settings)."""

    def __init__(
        self,
        client: Client,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore | None,
        settings: Settings,
    ) -> None:
        """`store`: where texts over the inline limit are kept (None: such a text is
        refused)."""
        self._client = client
        self._sessions = sessions
        self._store = store
        self._settings = settings

    async def start(self, caller: Caller, request: StartRequest) -> str:
        """Commit the session and its task, start its workflow; the session id."""
        caller.require("start")
        command = start_command(caller, request, self._settings)
        return await command.start(self._client, self._sessions, self._store)

    async def live_status(self, caller: Caller, session_id: str) -> AgentStatus:
        """Where the task's loop is now: its status, step and the calls waiting."""
        caller.require("read")
        sid = await self._owned(caller, session_id)
        return await tasks.live_status(self._client, str(sid))

    async def send(
        self, caller: Caller, session_id: str, text: str, *, message_id: str | None = None
    ) -> ItemRow:
        """Commit a follow-up message to a running task and wake its loop."""
        caller.require("send")
        return await tasks.send_message(
            self._client,
            self._sessions,
            caller.tenant_id,
            session_id,
            text,
            message_id=message_id,
            store=self._store,
            limits=self._settings.agent.text_limits(),
        )

    async def approve(
        self,
        caller: Caller,
        session_id: str,
        call_id: str,
        *,
        arguments: dict[str, Any] | None = None,
        device_id: str | None = None,
    ) -> DecisionResult:
        """Approve a waiting call, with `arguments` to run instead (checked against the
        tool's schema as its turn recorded it)."""
        caller.require("approve")
        decision = ApproveInput(call_id, caller.tenant_id, device_id=device_id)
        check_decider("decided_by", caller.user_id)
        sid = await self._decidable(caller, session_id, call_id, arguments)
        staged: dict[str, Any] = {"decided_by": caller.user_id}
        if arguments is not None:
            staged["arguments"] = arguments
        return await self._decide(caller, sid, "approve", decision, staged)

    async def reject(
        self,
        caller: Caller,
        session_id: str,
        call_id: str,
        reason: str = "",
        *,
        device_id: str | None = None,
    ) -> DecisionResult:
        """Reject a waiting call; the model is told who rejected it and why."""
        caller.require("reject")
        decision = RejectInput(call_id, caller.tenant_id, device_id=device_id)
        check_decider("decided_by", caller.user_id)
        check_reason(reason)
        sid = await self._decidable(caller, session_id, call_id, None)
        staged = {"decided_by": caller.user_id, "reason": reason}
        return await self._decide(caller, sid, "reject", decision, staged)

    async def cancel(self, caller: Caller, session_id: str) -> CancelResult:
        """Stop a task; `cancelled` False when it had already ended."""
        caller.require("cancel")
        sid = await self._owned(caller, session_id)
        handle = tasks.task_handle(self._client, str(sid))
        desc = await handle.describe()
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return CancelResult(str(sid), cancelled=False)
        result: CancelResult = await handle.execute_update(
            AgentWorkflow.cancel, CancelInput(caller.tenant_id), id=f"cancel:{uuid.uuid4()}"
        )
        return result

    async def resume(self, caller: Caller, session_id: str, *, max_steps: int | None = None) -> str:
        """Continue a failed or cancelled task from its last committed step, once the
        tenant's kill switch and quotas admit it as a running task again."""
        caller.require("resume")
        if max_steps is not None:
            check_range("max_steps", max_steps, 1, MAX_STEPS, open_low=False)
        sid = tasks.session_uuid(session_id)
        quotas = tenant_default(self._settings.agent.tenant_quotas, caller.tenant_id)
        await resume_run(
            self._client, self._sessions, caller.tenant_id, sid, quotas, max_steps=max_steps
        )
        return str(sid)

    async def fork(self, caller: Caller, request: ForkRequest) -> str:
        """Start a new task of the caller's tenant from another's committed items up to a
        step (workers/client/forks.py); the fork's session id. The parent is not written."""
        caller.require("fork")
        return await fork_task(
            self._client, self._sessions, self._store, self._settings, caller, request
        )

    async def replay(self, caller: Caller, request: ReplayRequest) -> str:
        """Start a replay of an ended task of the caller's tenant: a fork at its first step
        whose replies are served from its record (workers/client/replays.py); the replay's
        session id. The recorded session is not written."""
        caller.require("replay")
        return await replay_task(
            self._client, self._sessions, self._store, self._settings, caller, request
        )

    async def replay_report(self, caller: Caller, session_id: str) -> ReplayReport:
        """Where a replay stands against its record: its first divergence, and what was
        served from the record and what ran live."""
        caller.require("read")
        return await replay_report(self._sessions, caller.tenant_id, session_id)

    async def compare(self, caller: Caller, session_ids: Sequence[str]) -> Comparison:
        """Two or more of the tenant's sessions side by side, step by step, and where each
        first parts from the first (workers/client/comparison.py). Nothing is written."""
        caller.require("read")
        return await compare_sessions(self._sessions, caller.tenant_id, session_ids)

    async def raise_budget(
        self, caller: Caller, session_id: str, figures: Mapping[str, object]
    ) -> RaiseBudgetResult:
        """New budget figures (unnamed ones stay) for the task and its live sub-agents; a
        task parked at its budget goes on. The loop records the raise once it accepts it."""
        caller.require("raise_budget")
        unknown = sorted(set(figures) - set(RAISABLE))
        if unknown:
            raise InvalidTaskInput(
                unknown[0], f"a budget raise names only {', '.join(RAISABLE)}, not {unknown[0]!r}"
            )
        request = RaiseBudgetInput(caller.tenant_id)
        for name, value in figures.items():
            setattr(request, name, value)  # checked next, as they came: no coercion
        check_budget_raise(request)
        check_decider("decided_by", caller.user_id)
        sid = tasks.session_uuid(session_id)
        async with agent_state(self._sessions, caller.tenant_id) as st:
            session = await st.sessions.get(sid)  # the caller's tenant's, or not found
            tree = await st.sessions.tree(sid)
        result = await self._raise(caller, sid, request)
        # Its sub-agents spend the same budget, checked with the figures they started with:
        # the raise reaches each one still under way, and one parked at it goes on.
        ended = (*TERMINAL_STATUSES, SessionStatus.ARCHIVED)
        for child in (r.id for r in tree if r.id != sid and r.status not in ended):
            try:
                done = await self._raise(caller, child, request)
            except tasks.TaskNotRunning:
                continue  # it ended meanwhile
            result.resumed = result.resumed or done.resumed
        if result.resumed or session.status in _GATE_PARKS:
            result.held_by = await self._held_by(caller, session, result)
            result.resumed = result.resumed and result.held_by is None
        return result

    async def _held_by(
        self, caller: Caller, session: SessionRow, raised: RaiseBudgetResult
    ) -> str | None:
        """What the gate would hold the task at with the raised budget (its park's note), or
        None: the task goes on."""
        budget = TaskBudget(raised.tokens, raised.cost_usd, raised.tool_calls, raised.seconds)
        quotas = tenant_default(self._settings.agent.tenant_quotas, caller.tenant_id)
        async with agent_state(self._sessions, caller.tenant_id) as st:
            closed = await closed_now(st, session, budget, GateLimits(quota_defaults=quotas))
        return None if closed is None else park_of(closed, budget)[1]

    async def _raise(
        self, caller: Caller, sid: uuid.UUID, request: RaiseBudgetInput
    ) -> RaiseBudgetResult:
        async def send(request_id: str) -> RaiseBudgetResult:
            result: RaiseBudgetResult = await tasks.task_handle(
                self._client, str(sid)
            ).execute_update(
                "raise_budget",
                replace(request, request_id=request_id),
                id=f"raise_budget:{uuid.uuid4()}",
                result_type=RaiseBudgetResult,
            )
            return result

        return await self._with_request(caller, sid, None, {"decided_by": caller.user_id}, send)

    async def freeze(self, caller: Caller) -> TenantState:
        caller.require("freeze")
        return await freeze(self._sessions, caller.tenant_id, caller.user_id)

    async def thaw(self, caller: Caller) -> TenantState:
        caller.require("thaw")
        return await thaw(self._client, self._sessions, caller.tenant_id, caller.user_id)

    async def set_quotas(self, caller: Caller, changes: dict[str, Any]) -> TenantState:
        caller.require("set_quotas")
        defaults = tenant_default(self._settings.agent.tenant_quotas, caller.tenant_id)
        return await set_quotas(
            self._client, self._sessions, caller.tenant_id, changes, caller.user_id, defaults
        )

    async def _owned(self, caller: Caller, session_id: str) -> uuid.UUID:
        """The session id, once it is known to be the caller's tenant's (SessionNotFound
        otherwise, whatever state another tenant's is in)."""
        sid = tasks.session_uuid(session_id)
        async with agent_state(self._sessions, caller.tenant_id) as st:
            await st.sessions.get(sid)
        return sid

    async def _decidable(
        self,
        caller: Caller,
        session_id: str,
        call_id: str,
        arguments: dict[str, Any] | None,
    ) -> uuid.UUID:
        """Checks of a decision before anything is staged: the session the tenant's, edited
        arguments as the tool's schema allows, and a parked task's place among the tenant's
        running tasks."""
        if arguments is not None:
            if not isinstance(arguments, dict):
                raise InvalidTaskInput("arguments", "edited arguments must be a JSON object")
            check_json_text("arguments", arguments)
            limits = self._settings.agent.text_limits()
            size = json_size(arguments)
            check_size("the edited arguments", size, limits.max_edit_bytes, "AGENT_MAX_EDIT_BYTES")
        sid = tasks.session_uuid(session_id)
        async with agent_state(self._sessions, caller.tenant_id) as st:
            session = await st.sessions.get(sid)
            call = await st.items.tool_call(sid, call_id)
            if call is not None and arguments is not None:
                check_arguments(await call_schema(st, call), arguments)
            await self._within_running_tasks(st.controls, session)
        return sid

    async def _within_running_tasks(self, controls: TenantControls, session: SessionRow) -> None:
        """An approval takes a parked task back among the running: refused (QuotaRefused)
        while the tenant's running tasks are at their quota."""
        if session.status != SessionStatus.WAITING_APPROVAL:
            return
        defaults = tenant_default(self._settings.agent.tenant_quotas, session.tenant_id)
        quotas = (await controls.quotas()).over(defaults)
        await controls.check_running(quotas, session.id, "approve once a task ends")

    async def _decide(
        self,
        caller: Caller,
        sid: uuid.UUID,
        update: str,
        decision: ApproveInput | RejectInput,
        staged: dict[str, Any],
    ) -> DecisionResult:
        async def send(request_id: str) -> DecisionResult:
            decision.request_id = request_id
            return await send_decision(
                tasks.task_handle(self._client, str(sid)),
                update,
                decision,
                sessions=self._sessions,
                tenant_id=caller.tenant_id,
                session_id=sid,
            )

        return await self._with_request(caller, sid, decision.tool_call_id, staged, send)

    async def _with_request(
        self,
        caller: Caller,
        sid: uuid.UUID,
        call_id: str | None,
        staged: dict[str, Any],
        send: Callable[[str], Awaitable[T]],
    ) -> T:
        """Stage what an update says beyond ids (who decides, a reason, edited arguments),
        send the update with the request's id; drop the request if the loop refuses the
        update or no run takes it (TaskNotRunning), so a refused request leaves nothing."""
        async with agent_state(self._sessions, caller.tenant_id, write=True) as st:
            request_id = await st.requests.stage(sid, call_id, staged)
        try:
            return await send(str(request_id))
        except (WorkflowUpdateFailedError, RPCError) as err:
            # Refused, or no run to take it: the loop never saw the request. (A timeout may
            # have been accepted: its request stays for the loop, or is swept.)
            ended = isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND
            if ended or not isinstance(err, RPCError):
                async with agent_state(self._sessions, caller.tenant_id, write=True) as st:
                    await st.requests.drop(request_id)
            if ended:
                await tasks.check_running(tasks.task_handle(self._client, str(sid)), str(sid))
            raise
