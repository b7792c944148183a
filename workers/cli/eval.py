"""`agentctl eval TASKS.yaml --agents a,b`: the same tasks run on several agents, each as
`agentctl start` starts a task, then each task's runs compared and each agent scored
(workers/client/evals.py); `--json` prints the report for machines."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import TypeAdapter
from rich.table import Table

from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    err_console,
    run_async,
    temporal_client,
    with_resources,
)
from durable_agents.workers.cli.compare import cost_words
from durable_agents.workers.client.eval_tasks import MAX_FILE_BYTES, eval_tasks
from durable_agents.workers.client.evals import (
    MAX_RUNS,
    EvalReport,
    EvalRun,
    TaskResult,
    eval_agents,
    plan,
    run_eval,
)
from durable_agents.workers.client.render import one_line
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings

REPORT_JSON = TypeAdapter(EvalReport)
DEFAULT_WAIT_SECONDS = 1800.0
MAX_WAIT_SECONDS = 86400.0


def eval_cmd(
    tasks_file: Annotated[
        Path,
        typer.Argument(
            metavar="TASKS.yaml",
            help="A YAML list of tasks, each {name, text, check?, max_steps?, project?}.",
        ),
    ],
    agents: Annotated[
        str,
        typer.Option(metavar="A,B", help="The agents to run each task on, comma separated."),
    ],
    runs: Annotated[
        int, typer.Option(min=1, max=MAX_RUNS, help="How many times each agent runs each task.")
    ] = 1,
    wait: Annotated[
        float,
        typer.Option(
            min=1,
            max=MAX_WAIT_SECONDS,
            metavar="SECONDS",
            help="How long to wait for every run to end; runs still going are reported as "
            "they stand, and go on.",
        ),
    ] = DEFAULT_WAIT_SECONDS,
    tenant: Tenant = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run the same tasks on several agents and compare them: per task, each run's status,
    check, steps, tokens, cost, time and first divergence from the first agent's; per
    agent, checked successes, false completions, tokens, cost and median time."""
    try:
        with tasks_file.open("rb") as f:
            source = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ValueError(f"cannot read {tasks_file}: {err.strerror or err}") from None
    found = eval_tasks(source)
    names = eval_agents(agents.split(","))
    caller, settings = as_operator(tenant), get_settings()
    starts = plan(caller, found, names, runs, settings)

    def progress(line: str) -> None:
        err_console.print(line, markup=False, highlight=False, soft_wrap=True)

    async def go(res: Resources) -> EvalReport:
        client = await temporal_client()
        service = TaskService(client, res.sessions, res.store, settings)
        return await run_eval(service, client, caller, starts, wait_seconds=wait, progress=progress)

    report = run_async(with_resources(go))
    if as_json:
        typer.echo(REPORT_JSON.dump_json(report, indent=2).decode())
    else:
        for result in report.tasks:
            console.print(task_table(result))
        console.print(agents_table(report))
    if report.unfinished:
        err_console.print(
            f"error: {report.unfinished} runs had not ended after {wait:g} s; they go on "
            "(`agentctl compare` their sessions once they end)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


def task_table(result: TaskResult) -> Table:
    """A task's runs, and where each first parts from the first agent's first run."""
    first = result.runs[0]
    table = Table(title=f"task {one_line(result.task, 64)}", caption_justify="left")
    for name in ("run", "session", "status", "check", "steps", "tokens", "cost USD", "time"):
        table.add_column(name, no_wrap=True)
    parted = []
    for k, (run, s) in enumerate(zip(result.runs, result.comparison.sessions, strict=True)):
        table.add_row(
            _run(run),
            run.session_id[:8],
            s.shown,
            s.check or "-",
            str(s.steps),
            str(s.tokens),
            cost_words(s.cost_usd),
            f"{s.seconds:.1f} s",
        )
        if k:
            where = "no divergence" if s.divergence is None else str(s.divergence)
            parted.append(f"{_run(run)}: {where}")
    table.caption = f"first divergence from {_run(first)}:\n" + "\n".join(parted)
    return table


def _run(run: EvalRun) -> str:
    return f"{run.agent} #{run.run}"


def agents_table(report: EvalReport) -> Table:
    """Each agent over every task."""
    table = Table(title="agents")
    heads = ("agent", "checked / runs", "false completions", "tokens", "cost USD", "median time")
    for name in heads:
        table.add_column(name, no_wrap=True)
    for a in report.agents:
        table.add_row(
            a.agent,
            f"{a.checked} / {a.runs}",
            str(a.false_completions),
            str(a.tokens),
            cost_words(a.cost_usd),
            f"{a.median_seconds:.1f} s",
        )
    return table
