"""Inputs and results of the activities that write the loop's state in AgentState (decisions,
statuses, nudges, tool errors), of the GC and device-presence activities, and of delegation.
Durable contracts like workflows/contracts.py (which re-exports them): new fields optional,
no content.
"""

# No `from __future__ import annotations` in payload modules: the SDK's converter resolves a
# dataclass's field types with typing.get_type_hints on every decode (tests/test_old_payloads.py).

from dataclasses import dataclass

from durable_agents.workflows.gate_contracts import Closed, TaskBudget


@dataclass
class ApprovalRecordInput:
    session_id: str
    tenant_id: str
    step: int
    tool_call_id: str
    approved: bool
    # The decider's user id, or our own words ("timeout"); a person's reason and edited
    # arguments are in the request the client staged (request_id).
    decided_by: str
    # Our own words only ("no decision within 60s").
    reason: str
    idempotency_key: str
    device_id: str | None = None
    request_id: str | None = None
    # n > 0: the decision on re-run n of a call reported in doubt; a refusal's result then
    # says the call may or may not have taken effect.
    rerun: int = 0
    # Given: the session's status from this decision on (the loop running again), written
    # in the record's transaction with the run that writes it.
    status: str | None = None
    workflow_run_id: str | None = None


@dataclass
class BudgetRaiseRecordInput:
    """The loop's record of a raise it accepted: who raised it and the new figures."""

    session_id: str
    tenant_id: str
    idempotency_key: str
    decided_by: str
    request_id: str | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int | None = None
    seconds: float | None = None


@dataclass
class SessionStatusInput:
    session_id: str
    tenant_id: str
    status: str
    # A short, content-free reason; recorded as an error item when given with a key.
    detail: str | None = None
    idempotency_key: str | None = None
    workflow_run_id: str | None = None
    # A completion: whether its check passed (False: completed unchecked); None otherwise.
    checked: bool | None = None


@dataclass
class NudgeInput:
    """Tell the model its reply at `step` was no answer; the words are the activity's own,
    chosen by `reason` (a NonAnswer code, vocabulary/non_answers.py)."""

    session_id: str
    tenant_id: str
    step: int
    idempotency_key: str
    reason: str = "empty"


@dataclass
class ToolErrorInput:
    """A tool call that could not produce a result (retries exhausted, device offline).

    `message` is built by the loop from our own vocabulary (error types, the device id,
    attempt counts): never from a model reply, a tool's output or a provider's error text.
    """

    session_id: str
    tenant_id: str
    step: int
    tool_call_id: str
    name: str
    error_type: str
    message: str
    idempotency_key: str


@dataclass
class GcInput:
    window_seconds: float = 24 * 3600
    tenant_id: str | None = None
    dry_run: bool = False


@dataclass
class GcResult:
    marked: int
    revived: int
    swept: int
    orphans: int
    bytes_reclaimed: int
    dry_run: bool = False


@dataclass
class DevicePresenceInput:
    tenant_id: str
    device_id: str
    # Seen within this many seconds counts as online.
    within_seconds: float = 30.0


@dataclass
class DeviceRoute:
    """How a device call reaches its device: `via_gateway` when the tenant holds a live
    device key for it (the call is recorded in AgentState and leased by whichever gateway
    the device polls), else on the device's own task queue (a device that runs a Temporal
    worker itself); `online`: the device was seen within `within_seconds`."""

    online: bool
    via_gateway: bool


@dataclass
class ChildSessionInput:
    """Open the sub-agent session a `delegate` call asked for (arguments stay in AgentState)."""

    parent_session_id: str
    tenant_id: str
    step: int
    tool_call_id: str
    idempotency_key: str
    # What the gate admits the sub-agent against: the task's budget, on its root task.
    budget: TaskBudget | None = None
    budget_session_id: str | None = None


@dataclass
class ChildSession:
    """The sub-agent's session, once the gate admitted it. `closed`: not admitted yet (the
    parent parks and asks again); `refused`: not admitted at all, and the parent's call
    already has that as its result (`session_id` empty either way)."""

    session_id: str
    agent_name: str
    closed: Closed | None = None
    refused: bool = False


@dataclass
class DelegationResultInput:
    parent_session_id: str
    tenant_id: str
    step: int
    tool_call_id: str
    child_session_id: str
    child_status: str
    idempotency_key: str
    error: str | None = None
