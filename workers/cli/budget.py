"""agentctl budget: a task's budget, set at start (--budget NAME=VALUE) or raised later."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from durable_agents.activities.policies.task_rules import BUDGET_FIGURES
from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    run_async,
    session_id,
    with_service,
)
from durable_agents.workers.client.service import TaskService

budget_app = typer.Typer(no_args_is_help=True, help=__doc__)

BudgetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--budget",
        help="NAME=VALUE (repeatable): tokens, cost_usd, tool_calls or seconds the task may "
        "spend before it parks as budget_exhausted.",
    ),
]


def budget_options(pairs: list[str] | None) -> dict[str, Any]:
    """--budget pairs as start options (budget_tokens, ...); ranges are the command
    layer's."""
    kinds = {name: integer for name, _, integer in BUDGET_FIGURES}
    options: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or name not in kinds:
            raise ValueError(f"--budget wants NAME=VALUE with NAME one of {', '.join(kinds)}")
        try:
            options[f"budget_{name}"] = int(value) if kinds[name] else float(value)
        except ValueError:
            raise ValueError(f"--budget {name}: not a number") from None
    return options


@budget_app.command("raise")
def raise_cmd(
    session: str,
    tenant: Tenant = None,
    tokens: Annotated[int | None, typer.Option(help="Tokens in and out, in all.")] = None,
    cost_usd: Annotated[float | None, typer.Option(help="Cost in USD, in all.")] = None,
    tool_calls: Annotated[int | None, typer.Option(help="Tool calls, in all.")] = None,
    seconds: Annotated[float | None, typer.Option(help="Seconds since the start.")] = None,
    by: Annotated[str | None, typer.Option(help="Who decides (recorded).")] = None,
) -> None:
    """New budget figures for a task (unnamed ones stay); a parked task goes on."""
    session, caller = session_id(session), as_operator(tenant, by)
    given = {"tokens": tokens, "cost_usd": cost_usd, "tool_calls": tool_calls, "seconds": seconds}
    figures = {name: value for name, value in given.items() if value is not None}

    async def go(service: TaskService) -> str:
        result = await service.raise_budget(caller, session, figures)
        shown = f"tokens={result.tokens} cost_usd={result.cost_usd} "
        shown += f"tool_calls={result.tool_calls} seconds={result.seconds}"
        return ("resumed; " if result.resumed else "raised; ") + shown

    console.print(run_async(with_service(go)), markup=False, highlight=False)
