"""A tool call waiting for a person's decision, and the record the loop commits of it.
Deterministic workflow code only."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from durable_agents.workflows.contracts import (
    AgentInput,
    ApprovalRecordInput,
    ApproveInput,
    PendingApproval,
    RejectInput,
)


@dataclass
class Waiting:
    """What the loop knows of one waiting call; the approve/reject updates fill it in."""

    name: str
    step: int
    approved: bool | None = None
    decided_by: str = ""
    # Our own words (a timeout's); a person's reason is in their staged request.
    reason: str = ""
    device_id: str | None = None
    request_id: str | None = None
    # > 0: asking to run a call in doubt again (its n-th re-run).
    rerun: int = 0

    def decide(self, approved: bool, inp: ApproveInput | RejectInput) -> None:
        self.approved, self.decided_by = approved, inp.decided_by
        self.device_id, self.request_id = inp.device_id, inp.request_id

    def record(self, inp: AgentInput, tool_call_id: str, key: str) -> ApprovalRecordInput:
        """The decision as record_approval commits it (a person's words stay behind the
        staged request's id)."""
        return ApprovalRecordInput(
            session_id=inp.session_id,
            tenant_id=inp.tenant_id,
            step=self.step,
            tool_call_id=tool_call_id,
            approved=bool(self.approved),
            decided_by=self.decided_by,
            reason=self.reason,
            idempotency_key=key,
            device_id=self.device_id,
            request_id=self.request_id,
            rerun=self.rerun,
        )


async def decide_when_waiting(
    waiting: dict[str, Waiting], approved: bool, inp: ApproveInput | RejectInput
) -> None:
    """Apply a decision its validator accepted while the call waited undecided.

    Run as the update arrives, the validator has just seen the call waiting undecided, so
    the decision applies at once, in the same step (before, say, the call's approval timeout
    firing in the same activation could end its wait). A replay skips the validator and can
    run the handler before the code that puts the call in `waiting` has run again: the SDK
    applies an update before the activity results of the same workflow task, and a decision
    taken while the task was still writing the waiting status is recorded beside the reply
    that asked for it. The history holds the moment it was accepted, so the call comes to
    wait undecided; only then does the handler wait for it."""
    call_id = inp.tool_call_id

    def undecided() -> bool:
        call = waiting.get(call_id)
        return call is not None and call.approved is None

    if not undecided():
        await workflow.wait_condition(undecided)
    waiting[call_id].decide(approved, inp)


def check_waiting(waiting: dict[str, Waiting], decided: set[str], tool_call_id: str) -> None:
    """Refuse a decision for a call already decided or not waiting (an update validator)."""
    call = waiting.get(tool_call_id)
    if tool_call_id in decided or (call is not None and call.approved is not None):
        raise ApplicationError(
            f"tool call {tool_call_id!r} was already decided", type="AlreadyDecided"
        )
    if call is None:
        raise ApplicationError(
            f"no tool call {tool_call_id!r} is waiting for approval "
            f"(waiting: {sorted(waiting) or 'none'})",
            type="UnknownToolCall",
        )


def pending_approvals(waiting: dict[str, Waiting]) -> list[PendingApproval]:
    """The calls still waiting for a decision, as the status query reports them."""
    return [
        PendingApproval(call_id, w.name, w.step, rerun=w.rerun > 0)
        for call_id, w in waiting.items()
        if w.approved is None
    ]
