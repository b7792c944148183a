"""Replaying a task: run a recorded session again, against its agent or another, with the
model's replies served from the session's own record and its tools' results replayed, and
report the first step where the new trajectory parts from the recorded one.

A replay is a fork of the recorded session at its first step (workers/client/forks.py),
marked as a replay of it (storage/replays.py): it passes the start's door as a fork does,
a refusal writes nothing, and the recorded session is never written. The cassette is
served by the replay's own activities (activities/replays.py): a step whose request has
the fingerprint the recorded reply answered is served that reply; any other goes to the
live model. A call of a tool named in `live_tools` runs; any other gets the recorded
result of the same step, tool and arguments, or is refused without running.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from durable_agents.activities.agents import DEFAULT_AGENT, check_agent_name
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.activities.policies.text_limits import check_text
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.replays import (
    LIVE,
    RECORDED,
    REFUSED,
    NotReplayable,
    ReplayMark,
    offered_tools,
    replay_mark,
)
from durable_agents.storage.trajectories import Trajectory, load_trajectory
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES, SessionStatus
from durable_agents.workers.agent_loading import load_agents
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.forks import commit_fork, fork_options
from durable_agents.workers.client.tasks import session_uuid
from durable_agents.workers.client.trajectories import Divergence, first_divergence
from durable_agents.workers.settings import Settings
from durable_agents.workers.task_options import MAX_STEPS, TaskOptions

MAX_LIVE_TOOLS = 64
_MAX_TOOL_NAME = 128


@dataclass
class ReplayRequest:
    """Replay `session_id` (an ended task of the caller's tenant) with `agent` (None: its
    own), running the tools named in `live_tools` live; `options`: start options
    (TaskOptions fields), by the same scope map as a fork's."""

    session_id: str
    agent: str | None = None
    live_tools: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayReport:
    """Where a replay stands against its record: the first divergence (None: none so far,
    or none at all once it has ended), what was served from the record and what ran live,
    and how long each took (from the session's creation to its last status write)."""

    session_id: str
    recorded_id: str
    status: str
    ended: bool
    divergence: Divergence | None
    steps: int
    recorded_steps: int
    replies_recorded: int
    replies_live: int
    results_recorded: int
    results_live: int
    results_refused: int
    # The first reply the live model gave, and which part of its request differed.
    first_live: int | None
    first_live_why: str | None
    seconds: float
    recorded_seconds: float


async def replay_task(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore | None,
    settings: Settings,
    caller: Caller,
    request: ReplayRequest,
) -> str:
    """Commit the replay and start its workflow; the replay's session id. SessionNotFound
    for another tenant's session; NotReplayable, InvalidTaskInput, ScopeRefused,
    TenantFrozen or QuotaRefused before anything commits."""
    if request.agent is not None:
        check_agent_name(request.agent)
    live = _live_names(request.live_tools)
    recorded_id = session_uuid(request.session_id)
    async with agent_state(sessions, caller.tenant_id) as st:
        recorded = await st.sessions.get(recorded_id)  # another tenant's: not found
        _check_replayable(recorded.id, recorded.status, recorded.parent_id)
        trajectory = await load_trajectory(st, recorded_id)
        if not trajectory.steps:
            raise NotReplayable(f"session {recorded_id} has no model step to replay")
        offered = await offered_tools(st, recorded_id)
    options = fork_options(caller, recorded, request.agent, request.options, settings)
    first, last = trajectory.steps[0].step, trajectory.steps[-1].step
    options = _step_limit(options, request, first, last)
    known = offered | {c.name for s in trajectory.steps for c in s.calls}
    _check_live(live, known, _agent_tools(options.agent, settings))
    mark = ReplayMark(recorded_id, frozenset(live)).record()
    return await commit_fork(
        client, sessions, store, settings, caller, options, recorded_id, first, replay=mark
    )


async def replay_report(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, session_id: str
) -> ReplayReport:
    """The report of replay `session_id` against its record (NotReplayable: no replay)."""
    sid = session_uuid(session_id)
    async with agent_state(sessions, tenant_id) as st:
        mark = replay_mark(await st.sessions.get(sid))
        if mark is None:
            raise NotReplayable(f"session {sid} is no replay")
        replay = await load_trajectory(st, sid)
        recorded = await load_trajectory(st, mark.of)
    return report_of(recorded, replay)


def report_of(recorded: Trajectory, replay: Trajectory) -> ReplayReport:
    """The report of `replay` against `recorded` (both loaded from AgentState)."""
    ended = replay.status in TERMINAL_STATUSES
    served = [s.served for s in replay.steps]
    results = [c.result.served for s in replay.steps for c in s.calls if c.result is not None]
    live = next((s for s in replay.steps if s.served == LIVE), None)
    return ReplayReport(
        session_id=str(replay.session_id),
        recorded_id=str(recorded.session_id),
        status=replay.status,
        ended=ended,
        divergence=first_divergence(recorded, replay, ended=ended),
        steps=len(replay.steps),
        recorded_steps=len(recorded.steps),
        replies_recorded=served.count(RECORDED),
        replies_live=served.count(LIVE),
        results_recorded=results.count(RECORDED),
        results_live=results.count(LIVE),
        results_refused=results.count(REFUSED),
        first_live=live.step if live is not None else None,
        first_live_why=live.miss if live is not None else None,
        seconds=replay.seconds,
        recorded_seconds=recorded.seconds,
    )


def _check_replayable(sid: uuid.UUID, status: str, parent: uuid.UUID | None) -> None:
    if parent is not None:
        raise NotReplayable(f"session {sid} is a sub-agent's; replay its task instead")
    if status == SessionStatus.ARCHIVED:
        raise NotReplayable(f"session {sid} is archived; restore it first")
    if status not in TERMINAL_STATUSES:
        raise NotReplayable(f"session {sid} is {status}; a task is replayed once it has ended")


def _live_names(names: list[str]) -> list[str]:
    if not isinstance(names, list):
        raise InvalidTaskInput("live_tools", "live_tools must be a list of tool names")
    if len(names) > MAX_LIVE_TOOLS:
        raise InvalidTaskInput(
            "live_tools", f"at most {MAX_LIVE_TOOLS} live tools, got {len(names)}"
        )
    for name in names:
        check_text("live_tools", name)
        if not name or len(name) > _MAX_TOOL_NAME:
            raise InvalidTaskInput("live_tools", f"a tool name is 1-{_MAX_TOOL_NAME} characters")
    return sorted(set(names))


def _agent_tools(agent: str, settings: Settings) -> set[str] | None:
    """The tool names of `agent` as this deployment defines it; None when they are known
    only to its workers (an agent of definitions not given here, or with MCP toolsets,
    whose tools their servers list)."""
    definitions = settings.agent.definitions
    if agent == DEFAULT_AGENT:
        return {t.spec.name for t in builtin_tools()}
    if definitions is None:
        return None
    for defined in load_agents(definitions):
        if defined.name == agent and not defined.toolsets:
            return {t.spec.name for t in defined.tools}
    return None


def _check_live(live: list[str], recorded: set[str], agent: set[str] | None) -> None:
    """Each live tool is one the recorded session's model was offered or called, or one of
    the replaying agent's (when its tools are known here)."""
    if agent is None:
        return
    known = recorded | agent
    for name in live:
        if name not in known:
            listed = ", ".join(sorted(known)[:20]) or "none"
            raise InvalidTaskInput(
                "live_tools", f"no tool named {name[:64]!r} to run live; the tools are: {listed}"
            )


def _step_limit(options: TaskOptions, request: ReplayRequest, first: int, last: int) -> TaskOptions:
    """The replay's steps keep the record's numbering: a limit the caller set must leave it
    a step; by default, its agent's allowance from the first step, and at least as many
    steps as the record took."""
    if "max_steps" in request.options:
        if options.max_steps <= first:
            raise InvalidTaskInput(
                "max_steps",
                f"max_steps must be above the first step {first}, got {options.max_steps}",
            )
        return options
    steps = max(first + options.max_steps, last + 1)
    return replace(options, max_steps=min(MAX_STEPS, steps))
