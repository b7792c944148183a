"""agentctl budget: a task's budget, set at start (--budget NAME=VALUE) or raised later."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from durable_agents.activities.policies.task_rules import BUDGET_FIGURES, InvalidTaskInput
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
        metavar="NAME=VALUE",
        help="NAME=VALUE (repeatable): tokens, cost_usd, tool_calls or seconds the task may "
        "spend before it parks as budget_exhausted.",
    ),
]


KINDS = {name: integer for name, _, integer in BUDGET_FIGURES}


def parsed(field: str, text: str | None) -> int | float | None:
    """A figure as typed, read as the number it spells (`field` ends in its name); refused
    in the command layer's words when it spells none (`true`, `2.5` for a whole number)."""
    if text is None:
        return None
    integer = KINDS[field.removeprefix("budget_")]
    try:
        return int(text) if integer else float(text)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise InvalidTaskInput(field, f"{field} must be {kind}, got {text!r}") from None


def budget_options(pairs: list[str] | None) -> dict[str, Any]:
    """--budget pairs as start options (budget_tokens, ...); ranges are the command
    layer's."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or name not in KINDS:
            raise ValueError(f"--budget wants NAME=VALUE with NAME one of {', '.join(KINDS)}")
        options[f"budget_{name}"] = parsed(f"budget_{name}", value)
    return options


@budget_app.command("raise")
def raise_cmd(
    session: str,
    tenant: Tenant = None,
    tokens: Annotated[str | None, typer.Option(help="Tokens in and out, in all.")] = None,
    cost_usd: Annotated[str | None, typer.Option(help="Cost in USD, in all.")] = None,
    tool_calls: Annotated[str | None, typer.Option(help="Tool calls, in all.")] = None,
    seconds: Annotated[str | None, typer.Option(help="Seconds since the start.")] = None,
    by: Annotated[str | None, typer.Option(help="Who decides (recorded).")] = None,
) -> None:
    """New budget figures for a task (unnamed ones stay); a task parked at its budget goes
    on, unless something else still holds it (said so)."""
    session, caller = session_id(session), as_operator(tenant, by)
    given = {"tokens": tokens, "cost_usd": cost_usd, "tool_calls": tool_calls, "seconds": seconds}
    figures = {name: parsed(name, text) for name, text in given.items() if text is not None}

    async def go(service: TaskService) -> str:
        result = await service.raise_budget(caller, session, figures)
        shown = f"tokens={result.tokens} cost_usd={result.cost_usd} "
        shown += f"tool_calls={result.tool_calls} seconds={result.seconds}"
        if result.resumed:
            return f"resumed; {shown}"
        held = f"still held by {result.held_by}; " if result.held_by else ""
        return f"raised; {held}{shown}"

    console.print(run_async(with_service(go)), markup=False, highlight=False)
