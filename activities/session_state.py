"""Small AgentState writes the workflow makes: approval decisions and session status."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.errors import non_retryable, storage_errors_are_final
from durable_agents.activities.nudges import non_answer_code, nudge_text
from durable_agents.activities.tools.effects import EFFECT_IN_DOUBT, not_rerun_text
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.storage.tool_effects import EffectState
from durable_agents.storage.tool_results import ToolResult, commit_tool_result
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.item_marks import NUDGE_KEY
from durable_agents.vocabulary.non_answers import LOOKS_LIKE_KEY, NonAnswer
from durable_agents.vocabulary.previews import PREVIEW_CHARS
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workflows.contracts import (
    ApprovalRecordInput,
    BudgetRaiseRecordInput,
    CommittedItem,
    NudgeInput,
    SessionStatusInput,
    ToolErrorInput,
)


async def _request(st: AgentState, inp: ApprovalRecordInput) -> dict[str, Any]:
    """What the decider staged with the decision (a reason, edited arguments), taken into
    the record: {} when it staged nothing. A person's words never travel through history."""
    if not inp.request_id:
        return {}
    staged = await st.requests.take(
        uuid.UUID(inp.request_id), uuid.UUID(inp.session_id), inp.tool_call_id
    )
    if staged is None:
        raise non_retryable(
            "DecisionRequestNotFound",
            f"no staged request {inp.request_id} for call {inp.tool_call_id}",
        )
    return staged


def _same_decision(recorded: dict[str, Any], inp: ApprovalRecordInput) -> bool:
    """Whether the record under the decision's key is this decision's (a retried write)."""
    request = recorded.get("request_id", inp.request_id)  # not kept by older records
    return recorded.get("approved") is inp.approved and request == inp.request_id


async def _set_aside_lost(st: AgentState, recorded: ItemRow, inp: ApprovalRecordInput) -> None:
    """Another decision is recorded under this one's key: the workflow task that recorded
    it was lost with the server before it became history (the loop is asking again, and
    the person who sent it was told it failed). It never took effect: set aside, with the
    rejection's result it wrote, so the decision the loop acts on is the one on record."""
    why = "the workflow task that recorded it was lost; the call was decided again"
    if not recorded.data.get("approved"):
        result = await st.items.by_key(inp.idempotency_key)
        if result is not None and result.kind == ItemKind.TOOL_RESULT:
            await st.items.set_aside(result, why)
    await st.items.set_aside(recorded, why)


class SessionStateActivities:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    @activity.defn(name="record_approval")
    async def record_approval(self, inp: ApprovalRecordInput) -> CommittedItem:
        """Record who decided what, and the status it leaves the session in when given. A
        rejection also becomes the call's tool result, so the model is told why the call
        did not run."""
        session_id = uuid.UUID(inp.session_id)
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            items = st.items
            key = f"{inp.idempotency_key}:decision"
            done = await items.by_key(key)
            if done is not None and _same_decision(done.data, inp):
                # A retry after the record committed: the request is taken.
                return CommittedItem(item_id=str(done.id), ordinal=done.ordinal)
            if done is not None:
                await _set_aside_lost(st, done, inp)
            decision = "approved" if inp.approved else "rejected"
            staged = await _request(st, inp)
            reason = str(staged.get("reason") or inp.reason)
            edited = staged.get("arguments") if inp.approved else None
            decided_by = str(staged.get("decided_by") or inp.decided_by)
            row, _ = await items.append(
                NewItem(
                    session_id=session_id,
                    kind=ItemKind.APPROVAL,
                    role="user",
                    idempotency_key=key,
                    text=f"{decision} by {decided_by}" + (f": {reason}" if reason else ""),
                    tool_call_id=inp.tool_call_id,
                    data={
                        "approved": inp.approved,
                        "decided_by": decided_by,
                        "reason": reason,
                        "step": inp.step,
                        "device_id": inp.device_id,
                        **({"arguments": edited} if edited is not None else {}),
                        **({"rerun": inp.rerun} if inp.rerun else {}),
                        **({"request_id": inp.request_id} if inp.request_id else {}),
                    },
                )
            )
            if not inp.approved:
                # The name the model used, from AgentState: history does not carry it for
                # a tool the registry does not know.
                call = await items.tool_call(session_id, inp.tool_call_id)
                declined = f"rejected by {decided_by}: {reason or 'no reason given'}"
                row = await commit_tool_result(
                    st.db,
                    st.tenant_id,
                    ToolResult(
                        session_id=session_id,
                        tool_call_id=inp.tool_call_id,
                        tool_name=(call.tool_name if call is not None else None) or "",
                        step=inp.step,
                        idempotency_key=inp.idempotency_key,
                        # A declined re-run of a call in doubt: its newest result says it
                        # may have acted and was not run again.
                        error_type=EFFECT_IN_DOUBT if inp.rerun else "Rejected",
                        error=not_rerun_text(declined) if inp.rerun else f"the call was {declined}",
                        extra=(
                            {"effect": EffectState.IN_DOUBT, "rerun": inp.rerun, "declined": True}
                            if inp.rerun
                            else {}
                        ),
                    ),
                )
            if inp.status is not None:  # after the item: its append takes the row lock first
                await st.sessions.set_status(
                    session_id, inp.status, workflow_run_id=inp.workflow_run_id
                )
            return CommittedItem(item_id=str(row.id), ordinal=row.ordinal)

    @activity.defn(name="record_budget_raise")
    async def record_budget_raise(self, inp: BudgetRaiseRecordInput) -> CommittedItem:
        """Record a raise the loop accepted: who raised the budget, and to what."""
        figures = {
            name: value
            for name in ("tokens", "cost_usd", "tool_calls", "seconds")
            if (value := getattr(inp, name)) is not None
        }
        session_id = uuid.UUID(inp.session_id)
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            done = await st.items.by_key(inp.idempotency_key)
            if done is not None:  # a retry after the record committed: the request is taken
                return CommittedItem(item_id=str(done.id), ordinal=done.ordinal)
            staged: dict[str, Any] = {}
            if inp.request_id:
                found = await st.requests.take(uuid.UUID(inp.request_id), session_id, None)
                if found is None:
                    raise non_retryable(
                        "DecisionRequestNotFound", f"no staged request {inp.request_id}"
                    )
                staged = found
            by = str(staged.get("decided_by") or inp.decided_by)
            row, _ = await st.items.append(
                NewItem(
                    session_id=session_id,
                    kind=ItemKind.APPROVAL,
                    role="user",
                    idempotency_key=inp.idempotency_key,
                    text=f"{by} raises the budget: "
                    + ", ".join(f"{k} {v:g}" for k, v in figures.items()),
                    data={"budget_raise": figures, "decided_by": by},
                )
            )
            return CommittedItem(item_id=str(row.id), ordinal=row.ordinal)

    @activity.defn(name="record_tool_error")
    async def record_tool_error(self, inp: ToolErrorInput) -> CommittedItem:
        """A call that produced no result still gets one, so the model hears what happened."""
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            row = await commit_tool_result(
                st.db,
                st.tenant_id,
                ToolResult(
                    session_id=uuid.UUID(inp.session_id),
                    tool_call_id=inp.tool_call_id,
                    tool_name=inp.name,
                    step=inp.step,
                    idempotency_key=inp.idempotency_key,
                    error_type=inp.error_type,
                    error=inp.message,
                ),
            )
            return CommittedItem(item_id=str(row.id), ordinal=row.ordinal)

    @activity.defn(name="record_nudge")
    async def record_nudge(self, inp: NudgeInput) -> CommittedItem:
        """After a reply that was no answer: a user turn saying what it was (by its code)
        and asking for an answer or a tool call."""
        session_id = uuid.UUID(inp.session_id)
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            reason = non_answer_code(inp.reason)
            looks_like: list[str] = []
            if reason == NonAnswer.BARE_ARGUMENTS:
                # The tools the arguments fit, as the reply's commit named them from the
                # registry.
                reply = await st.items.first_of_kind(
                    session_id, ItemKind.ASSISTANT_MESSAGE, last=True
                )
                if reply is not None and reply.data.get("step") == inp.step:
                    looks_like = [str(t) for t in reply.data.get(LOOKS_LIKE_KEY, [])]
            words = nudge_text(reason, looks_like)
            row, _ = await st.items.append(
                NewItem(
                    session_id=session_id,
                    kind=ItemKind.USER_MESSAGE,
                    role="user",
                    idempotency_key=inp.idempotency_key,
                    text=words,
                    tokens=count_tokens(words),
                    data={NUDGE_KEY: str(reason), "step": inp.step},
                )
            )
            return CommittedItem(item_id=str(row.id), ordinal=row.ordinal)

    @activity.defn(name="set_session_status")
    async def set_session_status(self, inp: SessionStatusInput) -> None:
        session_id = uuid.UUID(inp.session_id)
        if not (inp.detail and inp.idempotency_key):
            # One UPDATE: it needs no transaction of its own (saves BEGIN and COMMIT).
            async with (
                storage_errors_are_final(),
                agent_state(self._sessions, inp.tenant_id, autocommit=True) as st,
            ):
                await st.sessions.set_status(
                    session_id, inp.status, workflow_run_id=inp.workflow_run_id, checked=inp.checked
                )
            return
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            await st.sessions.set_status(
                session_id, inp.status, workflow_run_id=inp.workflow_run_id, checked=inp.checked
            )
            await st.items.append(
                NewItem(
                    session_id=session_id,
                    kind=ItemKind.ERROR,
                    role="system",
                    idempotency_key=inp.idempotency_key,
                    text=inp.detail[:PREVIEW_CHARS],
                    tokens=count_tokens(inp.detail[:PREVIEW_CHARS]),
                    data={"status": inp.status},
                )
            )
