"""Two or more sessions of a tenant side by side (`agentctl compare`, GET /v1/compare, the
page's compare view, `agentctl eval`): per step, what each session's model called, which
argument keys differ from the first session's same call, how each result came out (and
whether its content is the first's, by sha256), the tokens, cost and time the step took;
then per session, how it ended (its status as shown, its check), its totals, its final
answer (a clipped preview: the text stays in AgentState) and where it first parts from the
first session (workers/client/trajectories.py's `first_divergence`).

Steps are set side by side by position, as `first_divergence` compares them. The words name
tools, argument keys, error types and statuses, never an argument's value or a result; the
answer previews are the only text of a reply here, and nothing here is logged.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.trajectories import Call, Step, Trajectory, load_trajectory
from durable_agents.vocabulary.previews import bounded
from durable_agents.vocabulary.session_status import (
    TERMINAL_STATUSES,
    SessionStatus,
    shown_status,
)
from durable_agents.workers.client.session_view import agent_label
from durable_agents.workers.client.tasks import session_uuid
from durable_agents.workers.client.trajectories import (
    Divergence,
    differing_keys,
    first_divergence,
)

MAX_SESSIONS = 8
ANSWER_CHARS = 200
_NAME_CHARS = 64

# A call's outcome: its result came back (ok), or an error ("error TYPE"), or not yet.
OK = "ok"
PENDING = "pending"
# How a result's content, or an answer's text, stands to the first session's.
SAME = "same"
DIFFERENT = "different"
# How a session's check stands: passed, failed, declared but not reached (the task ended
# otherwise, or runs), or None: no check known (the start declared none, and the task did
# not end where an agent's own check would have said).
PASSED = "passed"
FAILED = "failed"
NOT_REACHED = "not reached"


@dataclass(frozen=True)
class CallView:
    """A call of a step: its tool (as the model named it, clipped); the argument keys whose
    values differ from the first session's call at the same place, or `another_call` when
    the first session called another tool there (or none); its outcome; and `content`:
    SAME or DIFFERENT from that call's result content (None: the first session, no
    counterpart, or a result missing on either side)."""

    name: str
    outcome: str = PENDING
    other_keys: tuple[str, ...] = ()
    another_call: bool = False
    content: str | None = None


@dataclass(frozen=True)
class StepView:
    """One session's step. `answer`: for a step that called nothing, SAME or DIFFERENT
    from the first session's text at that step (None: the first session itself, or a step
    that called tools). `cost_usd` None: unpriced (its model has no price), or the reply
    was not counted. `seconds`: storage/trajectories.py's Step.seconds. `diverged`: the
    session first parts from the first session here."""

    step: int
    calls: tuple[CallView, ...]
    answered: bool
    answer: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal | None
    seconds: float | None
    diverged: bool = False


@dataclass(frozen=True)
class StepRow:
    """The steps at one position, one per compared session (None: it has no step there)."""

    index: int
    step: int
    sessions: tuple[StepView | None, ...]


@dataclass(frozen=True)
class SessionSummary:
    """How a session ended, in total. `shown`: its status as people read it; `check`: see
    PASSED, FAILED, NOT_REACHED (None: no check known). `tokens` and `cost_usd`: what the
    task spent, its sub-agents' replies and compactions included, as its budget counts
    (cost None: some reply unpriced). `seconds`: from its creation to its last status
    write. `answer`: a preview of its final answer (None: its last step called tools), of
    `answer_chars` characters in full. `divergence`: where it first parts from the first
    session (None: the first itself, or no divergence so far)."""

    session_id: uuid.UUID
    agent: str
    status: str
    shown: str
    ended: bool
    check: str | None
    steps: int
    tokens: int
    cost_usd: Decimal | None
    seconds: float
    answer: str | None
    answer_chars: int
    divergence: Divergence | None = None

    @property
    def false_completion(self) -> bool:
        """Completed while its declared check did not pass: the loop should never do it."""
        return self.status == SessionStatus.COMPLETED and self.check == FAILED


@dataclass(frozen=True)
class Comparison:
    """The sessions in the order asked (the first is what the others are compared with)
    and their steps, position by position."""

    sessions: tuple[SessionSummary, ...]
    steps: tuple[StepRow, ...]


@dataclass(frozen=True)
class Compared:
    """What a comparison reads of one session, in one unit of work."""

    trajectory: Trajectory
    agent: str
    checked: bool | None
    declares_check: bool
    costs: dict[str, Decimal | None]
    tokens: int
    cost_usd: Decimal | None


def compared_ids(ids: Sequence[str]) -> list[uuid.UUID]:
    """The session ids to compare, checked before anything is read: 2 to MAX_SESSIONS of
    them, each a session id, none twice (InvalidTaskInput naming `sessions`)."""
    if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
        raise InvalidTaskInput("sessions", "sessions must be a list of session ids")
    if len(ids) < 2:
        raise InvalidTaskInput("sessions", f"compare needs two sessions or more, got {len(ids)}")
    if len(ids) > MAX_SESSIONS:
        raise InvalidTaskInput(
            "sessions", f"compare takes at most {MAX_SESSIONS} sessions, got {len(ids)}"
        )
    sids: list[uuid.UUID] = []
    for text in ids:
        sid = session_uuid(text)
        if sid in sids:
            raise InvalidTaskInput("sessions", f"session {sid} is named twice")
        sids.append(sid)
    return sids


async def compare_sessions(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, ids: Sequence[str]
) -> Comparison:
    """The comparison of the tenant's sessions `ids` (SessionNotFound for one that is not
    the tenant's, whichever it is)."""
    sids = compared_ids(ids)
    async with agent_state(sessions, tenant_id) as st:
        loaded = [await load_compared(st, sid) for sid in sids]
    return comparison_of(loaded)


async def load_compared(st: AgentState, session_id: uuid.UUID) -> Compared:
    """What a comparison needs of one session of `st`'s tenant (InvalidTaskInput for an
    archived one: its items are in the cold tier, and it would compare as a task of none)."""
    session = await st.sessions.get(session_id)
    if session.status == SessionStatus.ARCHIVED:
        raise InvalidTaskInput(
            "sessions",
            f"session {session_id} is archived; restore it first "
            f"(agentctl archive restore {session_id})",
        )
    trajectory = await load_trajectory(st, session_id)
    costs = await st.usage.reply_costs([s.key for s in trajectory.steps if s.key])
    spend = await st.usage.session_spend(session_id)
    return Compared(
        trajectory,
        agent_label(session),
        session.checked,
        session.task_check is not None,
        costs,
        spend.tokens,
        spend.cost_usd,
    )


def comparison_of(loaded: Sequence[Compared]) -> Comparison:
    """The comparison of sessions already loaded; the first is the one compared with."""
    first = loaded[0].trajectory
    summaries = [_summary(c, None) for c in loaded[:1]]
    for c in loaded[1:]:
        ended = c.trajectory.status in TERMINAL_STATUSES
        summaries.append(_summary(c, first_divergence(first, c.trajectory, ended=ended)))
    depth = max(len(c.trajectory.steps) for c in loaded)
    rows = []
    for i in range(depth):
        base = first.steps[i] if i < len(first.steps) else None
        views = tuple(
            _step_view(c, c.trajectory.steps[i], base if k else None, summaries[k].divergence)
            if i < len(c.trajectory.steps)
            else None
            for k, c in enumerate(loaded)
        )
        number = next(v.step for v in views if v is not None)
        rows.append(StepRow(i, number, views))
    return Comparison(tuple(summaries), tuple(rows))


def _summary(c: Compared, divergence: Divergence | None) -> SessionSummary:
    t = c.trajectory
    last = t.steps[-1] if t.steps else None
    answer = last.text if last is not None and not last.calls else None
    return SessionSummary(
        session_id=t.session_id,
        agent=c.agent,
        status=t.status,
        shown=shown_status(t.status, c.checked),
        ended=t.status in TERMINAL_STATUSES,
        check=check_outcome(t.status, c.checked, c.declares_check),
        steps=len(t.steps),
        tokens=c.tokens,
        cost_usd=c.cost_usd,
        seconds=t.seconds,
        answer=None if answer is None else bounded(answer, ANSWER_CHARS),
        answer_chars=0 if answer is None else len(answer),
        divergence=divergence,
    )


def check_outcome(status: str, checked: bool | None, declared: bool) -> str | None:
    """How a session's check stands (PASSED, FAILED, NOT_REACHED, or None: none known).
    `declared`: the start declared a check; an agent's own shows in how the task ended."""
    if status == SessionStatus.CHECK_FAILED:
        return FAILED
    if status == SessionStatus.COMPLETED:
        if checked:
            return PASSED
        return FAILED if declared else None
    return NOT_REACHED if declared else None


def _step_view(
    c: Compared, step: Step, base: Step | None, divergence: Divergence | None
) -> StepView:
    """`step` of session `c`, set against `base`, the first session's step at the same
    position (None: this is the first session, or it has no step there)."""
    theirs = base.calls if base is not None else ()
    calls = tuple(
        _call_view(call, theirs[j] if j < len(theirs) else None, base is not None)
        for j, call in enumerate(step.calls)
    )
    answer = None
    if base is not None and not step.calls and not base.calls:
        answer = SAME if step.text == base.text else DIFFERENT
    return StepView(
        step=step.step,
        calls=calls,
        answered=not step.calls,
        answer=answer,
        input_tokens=step.input_tokens,
        output_tokens=step.output_tokens,
        cost_usd=c.costs.get(step.key),
        seconds=step.seconds,
        diverged=divergence is not None and divergence.step == step.step,
    )


def _call_view(call: Call, base: Call | None, compared: bool) -> CallView:
    name = bounded(call.name, _NAME_CHARS)
    outcome = _outcome(call)
    if not compared:
        return CallView(name, outcome)
    if base is None or base.name != call.name:
        return CallView(name, outcome, another_call=True)
    keys = tuple(differing_keys(base.arguments, call.arguments))
    content = None
    if call.result is not None and base.result is not None:
        alike = (call.result.sha256, call.result.error_type) == (
            base.result.sha256,
            base.result.error_type,
        )
        content = SAME if alike else DIFFERENT
    return CallView(name, outcome, keys, content=content)


def _outcome(call: Call) -> str:
    if call.result is None:
        return PENDING
    error = call.result.error_type
    return OK if error is None else f"error {bounded(error, _NAME_CHARS)}"
