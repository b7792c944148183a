"""The gateway's request and response bodies. Requests forbid unknown fields: a body that
names a tenant (or anything else we do not read) is refused, not silently ignored."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo

from durable_agents.activities.agents import DEFAULT_AGENT
from durable_agents.activities.policies.task_rules import MAX_REASON_CHARS, check_number
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.workers.client import replays
from durable_agents.workers.task_options import MAX_STEPS


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _as_sent(integer: bool) -> BeforeValidator:
    """No coercion at this door either: the command layer's rule reads the JSON value as it
    came (`true` or `"100"` is not a number), and its refusal is a 400 in its own words."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if value is not None:
            check_number(info.field_name or "value", value, integer=integer)
        return value

    return BeforeValidator(check)


WholeNumber = Annotated[int | None, _as_sent(integer=True)]
Number = Annotated[float | None, _as_sent(integer=False)]


class StartTask(Request):
    """Ranges, sizes and scopes are checked by the command layer (workers/client/commands.py), as
    at every other door, so a refusal reads the same here as from agentctl or Python."""

    text: str = Field(description="What the agent should do.")
    agent: str = Field(DEFAULT_AGENT, description="The agent definition to run.")
    max_steps: WholeNumber = Field(None, description=f"1-{MAX_STEPS} model steps.")
    approval_policies: dict[str, str] = Field(
        default_factory=dict,
        description="TOOL -> never|always|outside:DIR|match:ARG:REGEX|exists:ARG; each only "
        "adds approvals to what the agent asks for.",
    )
    loosened_approvals: dict[str, str] = Field(
        default_factory=dict,
        description="TOOL -> policy replacing the agent's own, so it may ask less (admin "
        "scope; who loosened what is kept with the session).",
    )
    project: str | None = None
    budget_tokens: WholeNumber = Field(None, description="Tokens in and out the task may use.")
    budget_cost_usd: Number = Field(None, description="USD the task may spend.")
    budget_tool_calls: WholeNumber = Field(None, description="Tool calls the task may make.")
    budget_seconds: Number = Field(None, description="Seconds the task may run.")
    check: dict[str, Any] | None = Field(
        None,
        description='How success is checked: {"files": [PATH], "contains": {PATH: [TEXT]}, '
        '"attempts": N}. The task completes only when its check (and its agent\'s) passes.',
    )


class FollowUp(Request):
    text: str = Field(min_length=1)


class Approve(Request):
    arguments: dict[str, Any] | None = Field(
        None, description="Run the call with these arguments instead of the model's."
    )


class Reject(Request):
    reason: str = Field("", max_length=MAX_REASON_CHARS, description="Told to the model.")


class Resume(Request):
    max_steps: WholeNumber = Field(None, description=f"1-{MAX_STEPS} model steps in all.")


class ForkTask(Request):
    """A fork of the session at step `at`: a new task sharing what the session committed
    before that step's model call. Checked by the command layer, as `agentctl fork` is."""

    at: Annotated[int, _as_sent(integer=True)] = Field(
        description="The step whose model call the fork makes itself."
    )
    agent: str | None = Field(None, description="Another agent definition (default: the task's).")
    instruction: str | None = Field(None, description="A user message the fork reads at `at`.")
    results: dict[str, str] | None = Field(
        None,
        description="CALL -> text: the fork's model reads the text as the result of call CALL "
        "of step `at - 1` (the results step `at` reads), in place of the one committed.",
    )
    max_steps: WholeNumber = Field(
        None, description=f"The fork's step limit from the task's start, up to {MAX_STEPS}."
    )
    budget_tokens: WholeNumber = Field(None, description="Tokens in and out the fork may use.")
    budget_cost_usd: Number = Field(None, description="USD the fork may spend.")
    budget_tool_calls: WholeNumber = Field(None, description="Tool calls the fork may make.")
    budget_seconds: Number = Field(None, description="Seconds the fork may run.")


class ReplayTask(Request):
    """A replay of the session (an ended task): its replies served from its record, its
    tools' results replayed except those of `live_tools`. Checked by the command layer, as
    `agentctl replay` is."""

    agent: str | None = Field(None, description="Another agent definition (default: the task's).")
    live_tools: list[str] = Field(
        default_factory=list, description="Tools run live rather than replayed."
    )
    max_steps: WholeNumber = Field(
        None, description=f"The replay's step limit from the task's start, up to {MAX_STEPS}."
    )
    budget_tokens: WholeNumber = Field(None, description="Tokens in and out the replay may use.")
    budget_cost_usd: Number = Field(None, description="USD the replay may spend.")
    budget_tool_calls: WholeNumber = Field(None, description="Tool calls the replay may make.")
    budget_seconds: Number = Field(None, description="Seconds the replay may run.")


class Divergence(BaseModel):
    step: int
    reason: str = Field(
        description="another call | other arguments | another result | another answer | "
        "ended earlier | ended later | another ending"
    )
    detail: str


class ReplayReport(BaseModel):
    """A replay against its record (workers/client/replays.py ReplayReport)."""

    session_id: uuid.UUID
    recorded_id: uuid.UUID
    status: str
    ended: bool
    divergence: Divergence | None = Field(
        description="The first step where the replay parts from its record; null: none (so "
        "far, while it runs)."
    )
    steps: int
    recorded_steps: int
    replies_recorded: int
    replies_live: int
    results_recorded: int
    results_live: int
    results_refused: int
    first_live: int | None
    first_live_why: str | None = Field(
        description="What differed in that step's request: model, system prompt, tools or messages."
    )
    seconds: float
    recorded_seconds: float

    @classmethod
    def of(cls, report: replays.ReplayReport) -> ReplayReport:
        found = report.divergence
        fields = {k: v for k, v in asdict(report).items() if k != "divergence"}
        divergence = None if found is None else Divergence(**asdict(found))
        return cls(**fields, divergence=divergence)


class Session(BaseModel):
    id: uuid.UUID
    status: str
    title: str
    agent: str
    parent_id: uuid.UUID | None
    root_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    wait_detail: dict[str, Any] | None
    # Completed: whether its check passed on the answer (false: completed unchecked).
    checked: bool | None = None
    # A fork: the session whose items it shares, up to ordinal forked_at.
    forked_from: uuid.UUID | None = None
    forked_at: int | None = None
    # A replay: {"of": the recorded session, "live_tools": [...]}.
    replay: dict[str, Any] | None = None

    @classmethod
    def of(cls, row: SessionRow) -> Session:
        return cls(
            id=row.id,
            status=row.status,
            title=row.title,
            agent=row.agent_definition,
            parent_id=row.parent_id,
            root_id=row.root_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
            wait_detail=row.wait_detail,
            checked=row.checked,
            forked_from=row.forked_from,
            forked_at=row.forked_at,
            replay=row.replay,
        )


class Item(BaseModel):
    id: uuid.UUID
    ordinal: int
    kind: str
    role: str
    text: str
    tool_call_id: str | None
    tool_name: str | None
    data: dict[str, Any]
    artifact_id: uuid.UUID | None
    created_at: datetime

    @classmethod
    def of(cls, row: ItemRow) -> Item:
        return cls(
            id=row.id,
            ordinal=row.ordinal,
            kind=row.kind,
            role=row.role,
            text=row.text,
            tool_call_id=row.tool_call_id,
            tool_name=row.tool_name,
            data=row.data,
            artifact_id=row.artifact_id,
            created_at=row.created_at,
        )


class SessionList(BaseModel):
    sessions: list[Session]
    next_before: uuid.UUID | None = Field(
        None, description="Pass as `before` for the next (older) page; null on the last."
    )


class SessionPage(BaseModel):
    session: Session
    items: list[Item]
    next_after: int | None = Field(
        None, description="Pass as `after` for the next page; null when this page is the end."
    )


class Started(BaseModel):
    session_id: uuid.UUID


class MessageSent(BaseModel):
    item_id: uuid.UUID
    ordinal: int


class Decided(BaseModel):
    tool_call_id: str
    approved: bool
    decided_by: str


class Cancelled(BaseModel):
    session_id: uuid.UUID
    cancelled: bool


class PendingCall(BaseModel):
    tool_call_id: str
    name: str
    step: int
    rerun: bool
    arguments: dict[str, Any] | None
    schema_: dict[str, Any] | None = Field(
        None,
        alias="schema",
        description="The tool's JSON schema for its arguments, as the call's turn recorded it.",
    )
    waiting_since: datetime | None = Field(
        None, description="When the model asked for the call (its tool_call item committed)."
    )

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class InboxEntry(BaseModel):
    session: Session
    pending: list[PendingCall]


class BudgetEntry(BaseModel):
    """A session parked at its budget: what it had spent (the park's note)."""

    session: Session
    reached: str


class Inbox(BaseModel):
    entries: list[InboxEntry]
    # Sessions parked at their budget, for someone with the approve scope to raise.
    budgets: list[BudgetEntry] = []
    # Sessions waiting for approval whose workflow did not answer in time (a busy or absent
    # worker): their calls are not known to be decided, so a page keeps what it shows of them.
    unanswered: list[str] = []


class Me(BaseModel):
    key_id: str
    tenant_id: str
    user_id: str
    scopes: list[str]


class Agents(BaseModel):
    agents: list[str]


class AgentTool(BaseModel):
    name: str
    description: str = Field(description="The first line of the tool's description.")
    approval: str | None = Field(
        None, description="The approval policy the agent already applies to it, if any."
    )


class AgentTools(BaseModel):
    agent: str
    tools: list[AgentTool]
    toolsets: list[str] = Field(
        default_factory=list,
        description="`server.*` per MCP toolset: policies may name its tools that way.",
    )


class ArtifactLink(BaseModel):
    url: str = Field(description="A short-lived presigned GET URL of the bytes.")
    sha256: str
    size_bytes: int
    content_type: str
    expires_in: int = Field(description="Seconds the URL stays valid.")
    content_encoding: str | None = Field(
        default=None,
        description="'zstd': the URL serves the compressed object (with Content-Encoding: "
        "zstd, which browsers decode); sha256 and size_bytes are of the decoded bytes. "
        "GET /v1/artifacts/{id} always serves the decoded bytes.",
    )
