"""An evaluation: the same tasks (workers/client/eval_tasks.py) run on several agents, each
task on each agent `runs` times, then compared (workers/client/comparison.py) task by task,
and scored per agent.

Each run is started as `agentctl start` would start it: through the one service, by the
caller's scopes, with the start's own rules, limits and the tenant's quotas. Every start is
built and checked before the first one runs, so a bad task or agent starts nothing (the
tenant's quotas are checked as each start commits: a quota reached halfway leaves the runs
started so far, which the refusal lists). Waiting is bounded; a run that has not ended by
then is reported as it stands, and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from temporalio.client import Client, WorkflowFailureError

from durable_agents.activities.agents import check_agent_name
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import (
    Caller,
    ScopeRefused,
    StartRequest,
    start_command,
)
from durable_agents.workers.client.comparison import (
    MAX_SESSIONS,
    PASSED,
    Comparison,
    SessionSummary,
)
from durable_agents.workers.client.eval_tasks import EvalTask, EvalTaskError
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.settings import Settings

MAX_AGENTS = MAX_SESSIONS
MAX_RUNS = MAX_SESSIONS
# Every run of a task is compared at once: agents x runs within what a comparison takes.
MAX_RUNS_PER_TASK = MAX_SESSIONS
MAX_STARTS = 200

Progress = Callable[[str], None]


@dataclass(frozen=True)
class EvalRun:
    """One start: the task's name, the agent, the run's number (from 1), its session."""

    task: str
    agent: str
    run: int
    session_id: str = ""


@dataclass(frozen=True)
class TaskResult:
    """A task's runs (agent by agent, run by run) and their comparison, the first run of
    the first agent being the one the others are compared with."""

    task: str
    runs: tuple[EvalRun, ...]
    comparison: Comparison


@dataclass(frozen=True)
class AgentScore:
    """An agent over every task's runs. `checked`: runs that completed with their check
    passed; `false_completions`: runs completed while their declared check failed (the
    loop should never do it: counted all the same); `cost_usd` None: some reply unpriced;
    `median_seconds`: of the runs' wall times."""

    agent: str
    runs: int
    checked: int
    false_completions: int
    tokens: int
    cost_usd: Decimal | None
    median_seconds: float


@dataclass(frozen=True)
class EvalReport:
    """Per task, its runs compared; per agent, its score; `unfinished`: runs that had not
    ended when the wait ran out (shown as they stood)."""

    tasks: tuple[TaskResult, ...]
    agents: tuple[AgentScore, ...]
    unfinished: int = 0


@dataclass(frozen=True)
class PlannedRun:
    """A run to start, and its start request (checked already)."""

    run: EvalRun
    request: StartRequest


def eval_agents(names: Sequence[str]) -> list[str]:
    """The agents to run, checked: 1-MAX_AGENTS names, none twice."""
    agents = [n.strip() for n in names if n.strip()]
    if not agents or len(agents) > MAX_AGENTS:
        raise InvalidTaskInput("agents", f"an evaluation runs 1-{MAX_AGENTS} agents")
    for name in agents:
        check_agent_name(name)
        if agents.count(name) > 1:
            raise InvalidTaskInput("agents", f"agent {name!r} is named twice")
    return agents


def plan(
    caller: Caller,
    eval_tasks: Sequence[EvalTask],
    agents: Sequence[str],
    runs: int,
    settings: Settings,
) -> list[PlannedRun]:
    """Every start of the evaluation, each checked as the start checks it (EvalTaskError
    naming the task and the field; ScopeRefused) before any of them runs."""
    caller.require("start")
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        raise InvalidTaskInput("runs", f"runs must be a whole number 1-{MAX_RUNS}")
    if not 2 <= len(agents) * runs <= MAX_RUNS_PER_TASK:
        raise InvalidTaskInput(
            "runs",
            f"agents x runs is 2-{MAX_RUNS_PER_TASK} (each task's runs are compared at once), "
            f"got {len(agents)} x {runs}",
        )
    if len(eval_tasks) * len(agents) * runs > MAX_STARTS:
        raise InvalidTaskInput("runs", f"an evaluation starts at most {MAX_STARTS} runs")
    starts = []
    for task in eval_tasks:
        for agent in agents:
            request = StartRequest(task.text, agent, dict(task.options))
            try:
                start_command(caller, request, settings)
            except (ValueError, ScopeRefused) as err:
                field = getattr(err, "field", None)
                raise EvalTaskError(repr(task.name), field, f"{err} (agent {agent})") from None
            starts += [
                PlannedRun(EvalRun(task.name, agent, n), request) for n in range(1, runs + 1)
            ]
    return starts


async def run_eval(
    service: TaskService,
    client: Client,
    caller: Caller,
    starts: Sequence[PlannedRun],
    *,
    wait_seconds: float,
    progress: Progress,
) -> EvalReport:
    """Start every run, wait for them to end (at most `wait_seconds`), compare them."""
    runs: list[EvalRun] = []
    for start in starts:
        try:
            sid = await service.start(caller, start.request)
        except Exception:
            if runs:
                progress(f"started before the refusal: {', '.join(r.session_id for r in runs)}")
            raise
        run = EvalRun(start.run.task, start.run.agent, start.run.run, sid)
        runs.append(run)
        progress(f"started {_name(run)}: {sid}")
    unfinished = await _wait(client, runs, wait_seconds, progress)
    results = []
    for name in dict.fromkeys(r.task for r in runs):
        mine = tuple(r for r in runs if r.task == name)
        compared = await service.compare(caller, [r.session_id for r in mine])
        results.append(TaskResult(name, mine, compared))
    return EvalReport(tuple(results), tuple(_scores(results)), unfinished)


async def _wait(
    client: Client, runs: Sequence[EvalRun], wait_seconds: float, progress: Progress
) -> int:
    """Wait for the runs to end, a line as each does; how many had not by the deadline."""
    began = time.monotonic()

    async def ended(run: EvalRun) -> EvalRun:
        # A failed run's workflow fails: AgentState says how it ended.
        with contextlib.suppress(WorkflowFailureError):
            await tasks.task_handle(client, run.session_id).result()
        return run

    waiting = {asyncio.ensure_future(ended(r)) for r in runs}
    done_count = 0
    try:
        for next_done in asyncio.as_completed(waiting, timeout=wait_seconds):
            run = await next_done
            done_count += 1
            took = time.monotonic() - began
            progress(f"ended {done_count} of {len(runs)} after {took:.0f} s: {_name(run)}")
    except TimeoutError:
        progress(f"{len(runs) - done_count} runs had not ended after {wait_seconds:g} s")
    finally:
        for waiter in waiting:
            waiter.cancel()
    return len(runs) - done_count


def _name(run: EvalRun) -> str:
    return f"{run.task} x {run.agent} (run {run.run})"


def _scores(results: Sequence[TaskResult]) -> list[AgentScore]:
    by_agent: dict[str, list[SessionSummary]] = {}
    for result in results:
        for run, summary in zip(result.runs, result.comparison.sessions, strict=True):
            by_agent.setdefault(run.agent, []).append(summary)
    scores = []
    for agent, mine in by_agent.items():
        costs = [s.cost_usd for s in mine]
        cost = None if None in costs else sum((c or Decimal(0) for c in costs), Decimal(0))
        scores.append(
            AgentScore(
                agent=agent,
                runs=len(mine),
                checked=sum(_checked(s) for s in mine),
                false_completions=sum(s.false_completion for s in mine),
                tokens=sum(s.tokens for s in mine),
                cost_usd=cost,
                median_seconds=statistics.median(s.seconds for s in mine),
            )
        )
    return scores


def _checked(s: SessionSummary) -> bool:
    return s.status == SessionStatus.COMPLETED and s.check == PASSED
