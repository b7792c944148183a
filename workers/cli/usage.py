"""agentctl usage: tokens and cost the tenant's model replies used, as committed."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

import typer
from rich.table import Table

from durable_agents.storage.usage import UsageSum
from durable_agents.workers.cli.common import (
    Tenant,
    console,
    run_async,
    tenant_or_default,
    with_resources,
)
from durable_agents.workers.client.usage_report import usage_filter, usage_report
from durable_agents.workers.resources import Resources


def _day(text: str | None, field: str) -> date | None:
    if text is None:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        raise typer.BadParameter(f"{field}: a UTC day as YYYY-MM-DD") from None


def _cost(row: UsageSum) -> str:
    # Unpriced replies make the sum unknown: shown as such, never as a smaller number.
    return "unpriced" if row.cost_usd is None else f"{row.cost_usd:.6f}"


def usage(
    tenant: Tenant = None,
    session: Annotated[str | None, typer.Option(help="One session's usage.")] = None,
    agent: Annotated[str | None, typer.Option(help="One agent definition's usage.")] = None,
    day: Annotated[
        str | None, typer.Option(metavar="DATE", help="One UTC day, YYYY-MM-DD.")
    ] = None,
    since: Annotated[
        str | None, typer.Option(metavar="DATE", help="From this UTC day on, YYYY-MM-DD.")
    ] = None,
) -> None:
    """Tokens (input, output, cached) and cost in USD, per day, agent and model."""
    t = tenant_or_default(tenant)
    where = usage_filter(
        session=session, agent=agent, day=_day(day, "--day"), since=_day(since, "--since")
    )

    async def go(res: Resources) -> None:
        report = await usage_report(res.sessions, t, where)
        table = Table("day", "agent", "model", "replies", "input", "output", "cached", "cost USD")
        for g in report.groups:
            table.add_row(
                str(g.day),
                g.agent,
                f"{g.provider}/{g.model}",
                str(g.replies),
                str(g.input_tokens),
                str(g.output_tokens),
                str(g.cached_tokens),
                _cost(g),
            )
        total = report.total
        table.add_row(
            "total",
            "",
            "",
            str(total.replies),
            str(total.input_tokens),
            str(total.output_tokens),
            str(total.cached_tokens),
            _cost(total),
        )
        console.print(table)

    run_async(with_resources(go))
