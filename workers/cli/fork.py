"""`agentctl fork`: a new task from another's committed items up to a step."""

from __future__ import annotations

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
    budget: BudgetOption = None,
) -> None:
    """Fork a task at a step into a new task of its own; prints the fork's session id. The
    task itself is not changed."""
    options: dict[str, Any] = budget_options(budget)
    if max_steps is not None:
        options["max_steps"] = max_steps
    request = ForkRequest(session_id(session), at, agent, instruction, options)
    caller = as_operator(tenant)

    async def go(service: TaskService) -> str:
        return await service.fork(caller, request)

    console.print(run_async(with_service(go)))
