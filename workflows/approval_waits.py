"""A tool call waiting for a person's decision, and the record the loop commits of it.
Deterministic workflow code only."""

from __future__ import annotations

from dataclasses import dataclass

from workflows.contracts import AgentInput, ApprovalRecordInput


@dataclass
class Waiting:
    """What the loop knows of one waiting call; the approve/reject updates fill it in."""

    name: str
    step: int
    approved: bool | None = None
    decided_by: str = ""
    reason: str = ""
    device_id: str | None = None
    edited_arguments_item_id: str | None = None
    decision_item_id: str | None = None
    # > 0: asking to run a call in doubt again (its n-th re-run).
    rerun: int = 0

    def record(self, inp: AgentInput, tool_call_id: str, key: str) -> ApprovalRecordInput:
        """The decision as record_approval commits it (a person's words stay behind the
        decision item's id)."""
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
            edited_arguments_item_id=self.edited_arguments_item_id,
            decision_item_id=self.decision_item_id,
            rerun=self.rerun,
        )
