"""Payloads that cross the workflow boundary.

These are durable contracts: they are written into Temporal history and read back by
later deploys, so new fields are optional with defaults and nothing here ever holds
content: no prompts, no tool output, no secrets.
"""

# No `from __future__ import annotations` in payload modules: the SDK's converter resolves a
# dataclass's field types with typing.get_type_hints on every decode, and string annotations
# are compiled again each time (~100 vs ~45 us a payload; tests/test_old_payloads.py).

import copy
from dataclasses import dataclass, field, replace

# Re-exported from storage, which owns them (modules without I/O, imported in the workflow
# sandbox like this one): payload types and old histories keep their shape.
from durable_agents.vocabulary.artifact_ref import ArtifactRef as ArtifactRef
from durable_agents.vocabulary.previews import PREVIEW_CHARS as PREVIEW_CHARS
from durable_agents.workflows.client_contracts import (
    AgentStatus as AgentStatus,
)

# Re-exported: payload types keep their home.
from durable_agents.workflows.client_contracts import (
    ApproveInput as ApproveInput,
)
from durable_agents.workflows.client_contracts import (
    CancelInput as CancelInput,
)
from durable_agents.workflows.client_contracts import (
    CancelResult as CancelResult,
)
from durable_agents.workflows.client_contracts import (
    DecisionResult as DecisionResult,
)
from durable_agents.workflows.client_contracts import (
    PendingApproval as PendingApproval,
)
from durable_agents.workflows.client_contracts import (
    RaiseBudgetInput as RaiseBudgetInput,
)
from durable_agents.workflows.client_contracts import (
    RaiseBudgetResult as RaiseBudgetResult,
)
from durable_agents.workflows.client_contracts import (
    RejectInput as RejectInput,
)
from durable_agents.workflows.client_contracts import (
    SendMessageInput as SendMessageInput,
)
from durable_agents.workflows.client_contracts import (
    TenantChangedInput as TenantChangedInput,
)
from durable_agents.workflows.gate_contracts import BudgetFigures as BudgetFigures
from durable_agents.workflows.gate_contracts import Closed as Closed
from durable_agents.workflows.gate_contracts import QuotaReached as QuotaReached
from durable_agents.workflows.gate_contracts import TaskBudget as TaskBudget
from durable_agents.workflows.state_contracts import (
    ApprovalRecordInput as ApprovalRecordInput,
)
from durable_agents.workflows.state_contracts import (
    BudgetRaiseRecordInput as BudgetRaiseRecordInput,
)
from durable_agents.workflows.state_contracts import (
    ChildSession as ChildSession,
)
from durable_agents.workflows.state_contracts import (
    ChildSessionInput as ChildSessionInput,
)
from durable_agents.workflows.state_contracts import (
    DelegationResultInput as DelegationResultInput,
)
from durable_agents.workflows.state_contracts import (
    DevicePresenceInput as DevicePresenceInput,
)
from durable_agents.workflows.state_contracts import (
    DeviceRoute as DeviceRoute,
)
from durable_agents.workflows.state_contracts import (
    GcInput as GcInput,
)
from durable_agents.workflows.state_contracts import (
    GcResult as GcResult,
)
from durable_agents.workflows.state_contracts import (
    NudgeInput as NudgeInput,
)
from durable_agents.workflows.state_contracts import (
    SessionStatusInput as SessionStatusInput,
)
from durable_agents.workflows.state_contracts import (
    ToolErrorInput as ToolErrorInput,
)
from durable_agents.workflows.task_settings import (
    DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS,
)
from durable_agents.workflows.task_settings import (
    DEFAULT_STUCK_AFTER as DEFAULT_STUCK_AFTER,
)
from durable_agents.workflows.task_settings import (
    DEFAULT_TOOL_TIMEOUT_SECONDS as DEFAULT_TOOL_TIMEOUT_SECONDS,
)
from durable_agents.workflows.task_settings import TaskSettings as TaskSettings


@dataclass
class CompactionRef:
    """The latest compaction: assembly starts from it. The loop's cursor into AgentState."""

    compaction_id: str
    version: int
    covers_through_ordinal: int


@dataclass
class AgentInput:
    """Start (or continue-as-new) input of AgentWorkflow: ids, the task's settings and
    cursors only."""

    session_id: str
    tenant_id: str = "default"
    # The options the task runs with (every door's TaskOptions carries them here).
    settings: TaskSettings = field(default_factory=TaskSettings)
    # Cursors carried across continue-as-new.
    step: int = 0
    seen_messages: int = 0
    received_messages: int = 0
    compaction: CompactionRef | None = None
    # How deep in a tree of delegations this run is (0 = a task a user started).
    depth: int = 0
    # A start from a plain Temporal client (trusted backends): the task text inline
    # (bounded) and the agent; the first activity commits both (workflows/session_open.py).
    # Only a first run carries the text: every input derived from this one drops it.
    task_text: str | None = None
    agent: str | None = None
    # A sub-agent's budget is its root task's: its model calls are checked against the
    # root session's spend, which grows with every reply of the tree (None: a root task).
    budget_root: str | None = None

    def with_defaults(self, defaults: "TaskDefaults") -> "AgentInput":
        """This input with every setting it left unset taken from `defaults`."""
        settings = self.settings.with_defaults(
            defaults.max_steps, defaults.tool_timeout_seconds, defaults.budget, defaults.stuck_after
        )
        return replace(copy.deepcopy(self), settings=settings)

    # Copies go through replace() on a deep copy, never field by field: a field left out of
    # a hand-written copy would silently reset to its default at continue-as-new.

    def continued(
        self,
        *,
        step: int,
        seen_messages: int,
        received_messages: int,
        compaction: CompactionRef | None,
    ) -> "AgentInput":
        """The next run's input after continue-as-new: every setting kept, the cursors moved."""
        return replace(
            copy.deepcopy(self),
            step=step,
            seen_messages=seen_messages,
            received_messages=received_messages,
            compaction=compaction,
            task_text=None,
        )

    def for_child(self, session_id: str) -> "AgentInput":
        """A sub-agent's input: the parent's settings, its own session, fresh cursors, one
        level deeper. It runs cloud-side only: the device serves its parent's task."""
        return replace(
            copy.deepcopy(self),
            session_id=session_id,
            settings=replace(copy.deepcopy(self.settings), device_id=None, device_tools=[]),
            step=0,
            seen_messages=0,
            received_messages=0,
            compaction=None,
            depth=self.depth + 1,
            task_text=None,
            budget_root=self.budget_root or self.session_id,
        )


@dataclass
class TaskDefaults:
    """What a run's start left unset, as every door would have set it: its agent's Limits
    (max steps, tool timeout, budget) with the tenant's default budget, the tighter figure
    of the two."""

    max_steps: int
    tool_timeout_seconds: float
    budget: TaskBudget = field(default_factory=TaskBudget)
    stuck_after: int = DEFAULT_STUCK_AFTER


@dataclass
class TaskDefaultsInput:
    session_id: str
    tenant_id: str


@dataclass
class AgentResult:
    session_id: str
    status: str
    steps: int
    final_item_id: str | None = None
    last_error: str | None = None
    # Completed: whether the task's own check passed on its answer (False: it declares
    # none, so the answer is the model's claim, unchecked).
    checked: bool = False


@dataclass
class PendingDeviceCall:
    """A device call started but without its result yet: context assembly tells the model
    it is pending (ids only)."""

    tool_call_id: str
    step: int
    device_id: str


@dataclass
class ModelCallInput:
    session_id: str
    tenant_id: str
    step: int
    idempotency_key: str
    # The task's device: the tools of its agent's device-local MCP servers are offered
    # from what that device registered.
    device_id: str | None = None
    # Device calls still running while the loop takes this step (bounded by the task's
    # max_pending_device_calls).
    pending_device_calls: list[PendingDeviceCall] = field(default_factory=list)
    # Checked against the session's committed usage before the provider is called.
    budget: TaskBudget | None = None
    # Whose spend the budget counts (a sub-agent's root task); None: this session's.
    budget_session_id: str | None = None


@dataclass
class ToolCallRef:
    """A tool call the model asked for; its arguments stay in AgentState."""

    tool_call_id: str
    name: str
    item_id: str
    # Decided by the activity from the tool registry, so the workflow stays deterministic.
    needs_approval: bool = False
    known: bool = True
    # A decision AgentState already holds for this call (a resumed run re-reads a step whose
    # approvals were decided): True approved, False rejected, None never decided.
    decision: bool | None = None
    # A tool of a device-local MCP server: it runs on the task's device.
    on_device: bool = False


@dataclass
class ModelCallResult:
    item_id: str
    ordinal: int
    tool_calls: list[ToolCallRef] = field(default_factory=list)
    # (`finished` and `finish_reason` were read by nobody and are gone; histories that
    # carry them still decode: the converter ignores keys a dataclass does not have.)
    # Tokens of the assembled input; past the turn's threshold the loop compacts.
    context_tokens: int = 0
    compaction_due: bool = False
    # A NonAnswer code (vocabulary/non_answers.py) when the reply called no tool and is no
    # answer: empty, bare arguments, example calls, cut at its limit. The loop nudges the
    # model once. A code only, never the reply's text.
    non_answer: str | None = None
    # Set: the gate did not admit this step; nothing was called or committed, and `item_id`
    # is empty. The loop parks and takes the same step once woken.
    closed: Closed | None = None
    # An answer (no tool call) of a task that declares no check: the loop accepts it as
    # completed unchecked without asking the check activity. False (and in histories from
    # before the field): the check activity decides.
    unchecked: bool = False


@dataclass
class CompactInput:
    session_id: str
    tenant_id: str
    step: int
    idempotency_key: str


@dataclass
class ToolRunInput:
    session_id: str
    tenant_id: str
    step: int
    tool_call_id: str
    name: str
    idempotency_key: str
    # n > 0: the n-th run a person approved after the call was reported in doubt (its key
    # is the call's with ":rerun{n}").
    rerun: int = 0
    # The device a call dispatched through the gateways is for (offer_device_call).
    device_id: str | None = None
    # What the gate admits the call against: the task's budget, counted on its root task.
    budget: TaskBudget | None = None
    budget_session_id: str | None = None


@dataclass
class ToolOutcome:
    """A committed tool result: where it is in AgentState and the ref to its full content.

    No preview travels here: for a small output the preview *is* the output, and tool
    output never enters history. The ≤500-char preview lives on the AgentState item.
    """

    tool_call_id: str
    item_id: str
    ordinal: int
    ref: ArtifactRef | None = None
    # Set when the result is an error.
    error_type: str | None = None
    # An effectful call an interrupted attempt may or may not have run: the loop asks a
    # person whether to run it again (the effects contract, DESIGN invariant 8).
    in_doubt: bool = False
    # The re-run this result comes from (0: the call's first run). A resumed run re-reading
    # a call in doubt gets the newest result, and goes on from there.
    rerun: int = 0
    # Set: the gate did not admit the call; it did not run and nothing was committed
    # (`item_id` empty). The loop parks and runs it under the same key once woken.
    closed: Closed | None = None
    # A failed result: how many failed results of the same call (tool and arguments) the
    # session holds, this one included (the loop stops a task stuck on one).
    repeats: int = 0
    # An effectful call that found nothing to change (a write of what the file held): no
    # progress, as a failure is not.
    unchanged: bool = False


@dataclass
class OpenSessionInput:
    """Open a plain client's session; the text is read from the run's start event, so
    history holds it once."""

    session_id: str
    tenant_id: str
    agent: str
    idempotency_key: str


@dataclass
class CommittedItem:
    item_id: str
    ordinal: int
