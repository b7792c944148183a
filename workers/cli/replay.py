"""`agentctl replay`: run an ended task again from its own record, against its agent or
another, and say where the new trajectory first parts from the recorded one;
`agentctl replay-report`: that report for a replay started earlier."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

import typer
from temporalio.client import WorkflowFailureError

from durable_agents.workers.cli.budget import BudgetOption, budget_options
from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    run_async,
    session_id,
    temporal_client,
    with_resources,
    with_service,
)
from durable_agents.workers.client import tasks
from durable_agents.workers.client.replays import ReplayReport, ReplayRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.task_options import MAX_STEPS

# The exit code of a replay that parted from its record (errors exit 1, usage errors 2).
DIVERGED = 3


def replay(
    session: Annotated[str, typer.Argument(help="The ended task to replay (its session id).")],
    tenant: Tenant = None,
    agent: Annotated[
        str | None,
        typer.Option(help="Another agent definition to replay with (default: the task's)."),
    ] = None,
    live: Annotated[
        list[str] | None,
        typer.Option(
            metavar="TOOL",
            help="A tool whose calls run live rather than get their recorded results "
            "(repeatable). A call neither recorded nor live is refused, not run.",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            help="Wait for the replay to end and print its report (exit 3 if it "
            "diverged); --no-wait prints its session id."
        ),
    ] = True,
    max_steps: Annotated[
        int | None,
        typer.Option(
            help=f"The replay's step limit, counted from the task's start, up to {MAX_STEPS} "
            "(default: the record's steps, or more as its agent allows).",
        ),
    ] = None,
    budget: BudgetOption = None,
) -> None:
    """Replay a task from its record: model replies are served from it while the requests
    match, tool results are replayed; prints the first step where the replay diverges (and
    why) or "no divergence". The task itself is not changed."""
    options: dict[str, Any] = budget_options(budget)
    if max_steps is not None:
        options["max_steps"] = max_steps
    request = ReplayRequest(session_id(session), agent, list(live or []), options)
    caller = as_operator(tenant)

    async def go(res: Resources) -> ReplayReport | str:
        client = await temporal_client()
        service = TaskService(client, res.sessions, res.store, get_settings())
        started = await service.replay(caller, request)
        if not wait:
            return started
        # A failed run is a report too: AgentState says how it ended.
        with contextlib.suppress(WorkflowFailureError):
            await tasks.task_handle(client, started).result()
        return await service.replay_report(caller, started)

    done = run_async(with_resources(go))
    if isinstance(done, str):
        console.print(done)
        return
    _print(done)
    if done.divergence is not None:
        raise typer.Exit(DIVERGED)


def replay_report(
    session: Annotated[str, typer.Argument(help="The replay (its session id).")],
    tenant: Tenant = None,
) -> None:
    """Print a replay's report: its first divergence from its record, or "no divergence"
    (so far, while it runs)."""
    sid, caller = session_id(session), as_operator(tenant)

    async def go(service: TaskService) -> ReplayReport:
        return await service.replay_report(caller, sid)

    _print(run_async(with_service(go)))


def report_lines(report: ReplayReport) -> list[str]:
    """The report in a few lines of our words."""
    state = report.status if report.ended else f"{report.status}, still running"
    lines = [f"replay {report.session_id} of {report.recorded_id}: {state}"]
    if report.divergence is None:
        lines.append("no divergence" if report.ended else "no divergence so far")
    else:
        lines.append(f"first divergence at {report.divergence}")
    lines.append(
        f"steps: {report.steps} (the record {report.recorded_steps}); replies: "
        f"{report.replies_recorded} from the record, {report.replies_live} live"
    )
    if report.first_live is not None:
        why = report.first_live_why or "request"
        lines.append(f"first live reply: step {report.first_live} (its {why} differed)")
    lines.append(
        f"tool results: {report.results_recorded} replayed, {report.results_live} live, "
        f"{report.results_refused} refused (not recorded, not live)"
    )
    took = f"wall time: {report.seconds:.1f} s"
    if report.ended and report.recorded_seconds > 0:
        share = report.seconds / report.recorded_seconds
        took += f" (the record {report.recorded_seconds:.1f} s: {share:.1%})"
    lines.append(took)
    return lines


def _print(report: ReplayReport) -> None:
    for line in report_lines(report):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
