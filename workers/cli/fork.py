"""`agentctl fork`: a new task from another's committed items up to a step."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from durable_agents.workers.cli.budget import BudgetOption, budget_options
from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    run_async,
    session_id,
    with_service,
)
from durable_agents.workers.client.forks import ForkRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.task_options import MAX_STEPS


def fork(
    session: Annotated[str, typer.Argument(help="The task to fork (its session id).")],
    at: Annotated[
        int,
        typer.Option(
            "--at",
            metavar="STEP",
            help="The step whose model call the fork makes itself; it shares everything "
            "the task committed before it.",
        ),
    ],
    tenant: Tenant = None,
    agent: Annotated[
        str | None,
        typer.Option(help="Another agent definition for the fork (default: the task's)."),
    ] = None,
    instruction: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="A user message the fork's model reads at STEP."),
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option(
            help=f"The fork's step limit, counted from the task's start, up to {MAX_STEPS} "
            "(default: STEP plus its agent's).",
        ),
    ] = None,
    result: Annotated[
        list[str] | None,
        typer.Option(
            "--result",
            metavar="CALL=FILE",
            help="CALL=FILE (repeatable): the fork's model reads FILE's text (UTF-8; - for "
            "standard input) as the result of CALL, a call of step STEP-1.",
        ),
    ] = None,
    budget: BudgetOption = None,
) -> None:
    """Fork a task at a step into a new task of its own; prints the fork's session id. The
    task itself is not changed."""
    options: dict[str, Any] = budget_options(budget)
    if max_steps is not None:
        options["max_steps"] = max_steps
    results = edited_results(result)
    request = ForkRequest(session_id(session), at, agent, instruction, options, results)
    caller = as_operator(tenant)

    async def go(service: TaskService) -> str:
        return await service.fork(caller, request)

    console.print(run_async(with_service(go)))


def edited_results(pairs: list[str] | None) -> dict[str, str]:
    """--result CALL=FILE pairs as call id -> the file's text; the command layer checks
    the rest (the call, the size, the text), as at every door."""
    results: dict[str, str] = {}
    for pair in pairs or []:
        call, sep, path = pair.partition("=")
        if not sep or not call or not path:
            raise ValueError("--result wants CALL=FILE (FILE a path, or - for standard input)")
        if call in results:
            raise ValueError(f"--result {call} is given twice")
        where = "standard input" if path == "-" else path
        try:
            data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        except OSError as err:
            raise ValueError(f"--result {call}: cannot read {where}: {err.strerror}") from None
        try:
            results[call] = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"--result {call}: {where} is not UTF-8 text (at byte {err.start})"
            ) from None
    return results
