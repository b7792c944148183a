"""What clients send the agent loop and read from it: its updates (approve, reject,
cancel), its signal (send_message) and its status query. Durable contracts like
workflows/contracts.py (which re-exports them): new fields optional, no content.
"""

# No `from __future__ import annotations` in payload modules: the SDK's converter resolves a
# dataclass's field types with typing.get_type_hints on every decode, and string annotations
# are compiled again each time (~100 vs ~45 us a payload; tests/test_old_payloads.py).

from dataclasses import dataclass, field


@dataclass
class ApproveInput:
    tool_call_id: str
    # The caller's tenant: a decision without one, or from another tenant, is refused.
    tenant_id: str | None = None
    # Who decides, from a raw Temporal update (1-100 characters, no control characters);
    # the service's decisions leave it empty: who decides is in their staged request.
    decided_by: str = ""
    device_id: str | None = None
    # The request the client staged (storage/decision_requests.py) with what must not
    # travel in history: who decides, and edited arguments to run instead.
    request_id: str | None = None


@dataclass
class RejectInput:
    tool_call_id: str
    tenant_id: str | None = None
    decided_by: str = ""
    device_id: str | None = None
    # The staged request holding who rejected the call and the reason the model is told.
    request_id: str | None = None


@dataclass
class DecisionResult:
    tool_call_id: str
    approved: bool


@dataclass
class SendMessageInput:
    """Announces a user message the client already committed to AgentState."""

    item_id: str
    ordinal: int
    # The sender's tenant: a signal without one, or from another tenant, is ignored.
    tenant_id: str | None = None


@dataclass
class CancelInput:
    """Asks the loop to stop; refused unless it comes from the task's own tenant."""

    tenant_id: str | None = None


@dataclass
class CancelResult:
    session_id: str
    # False when the task had already ended.
    cancelled: bool


@dataclass
class RaiseBudgetInput:
    """New figures for a task's budget (None: that figure stays as it is); the loop records
    the raise, with who raised it, once it accepted it."""

    tenant_id: str | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int | None = None
    seconds: float | None = None
    # Who raised it: from a raw update, here; from the service, in its staged request.
    decided_by: str = ""
    request_id: str | None = None


@dataclass
class RaiseBudgetResult:
    session_id: str
    # True: the task was parked at its budget and goes on now.
    resumed: bool
    tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int | None = None
    seconds: float | None = None
    # What still holds the parked task after the raise, in its park's words (a figure the
    # raise left reached, the tenant frozen or at a quota); None: nothing. The service
    # (workers/client/service.py) fills it in; the loop never does.
    held_by: str | None = None


@dataclass
class TenantChangedInput:
    """A tenant was thawed or its quotas changed: a task of it parked at its quota or
    frozen checks again. Carries nothing but the tenant (a stranger's is ignored)."""

    tenant_id: str | None = None


@dataclass
class PendingApproval:
    tool_call_id: str
    name: str
    step: int
    # True: the call was reported in doubt and this asks whether to run it again (approve
    # or reject it by the same tool_call_id).
    rerun: bool = False


@dataclass
class AgentStatus:
    session_id: str
    status: str
    step: int
    pending_approvals: list[PendingApproval] = field(default_factory=list)
    last_error: str | None = None
    # The devices whose calls the loop has started and not had back: a client that finds
    # one away says the task waits for it (workers/client/watch/wait_status.py).
    pending_devices: list[str] = field(default_factory=list)
