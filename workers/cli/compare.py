"""`agentctl compare`: two or more sessions side by side, a row per step and a column pair
per session, then how each ended and where it first parts from the first
(workers/client/comparison.py); `--json` prints what GET /v1/compare answers."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

import typer
from pydantic import TypeAdapter
from rich.table import Table
from rich.text import Text

from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    run_async,
    session_id,
    with_service,
)
from durable_agents.workers.client.comparison import (
    CallView,
    Comparison,
    SessionSummary,
    StepView,
)
from durable_agents.workers.client.render import one_line
from durable_agents.workers.client.service import TaskService

COMPARISON_JSON = TypeAdapter(Comparison)
# What a table cell shows of the model's own words (tool names, argument keys, answers).
_NAME_WIDTH = 40
_ANSWER_WIDTH = 60


def compare(
    sessions: Annotated[
        list[str],
        typer.Argument(
            metavar="SESSION...",
            help="Two or more session ids; the first is the one the others are compared with.",
        ),
    ],
    tenant: Tenant = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON (as GET /v1/compare).")
    ] = False,
) -> None:
    """Compare sessions step by step: each step's calls, the argument keys that differ from
    the first session's, results, tokens, cost and time; then each session's status, check,
    totals, final answer and first divergence from the first."""
    ids, caller = [session_id(s) for s in sessions], as_operator(tenant)

    async def go(service: TaskService) -> Comparison:
        return await service.compare(caller, ids)

    found = run_async(with_service(go))
    if as_json:
        typer.echo(COMPARISON_JSON.dump_json(found, indent=2).decode())
        return
    console.print(steps_table(found))
    console.print(summary_table(found.sessions))


def label(index: int, s: SessionSummary) -> str:
    """How a table names the session: its place, short id and agent."""
    return f"{index + 1}: {str(s.session_id)[:8]} {one_line(s.agent, _NAME_WIDTH)}"


def steps_table(c: Comparison) -> Table:
    """A row per step, a column per session: what it called and how that came out, then
    what the step took."""
    table = Table(title="steps (compared with session 1)", show_lines=True)
    table.add_column("step", justify="right", no_wrap=True)
    for k, s in enumerate(c.sessions):
        table.add_column(label(k, s), overflow="fold")
    for row in c.steps:
        cells: list[str | Text] = [str(row.step)]
        cells += ["" if view is None else _cell(view) for view in row.sessions]
        table.add_row(*cells)
    return table


def summary_table(sessions: tuple[SessionSummary, ...]) -> Table:
    """How each session ended, a column per session: status, check, totals, its first
    divergence from the first and its final answer."""
    table = Table(title="sessions", show_lines=True)
    table.add_column("", no_wrap=True)
    for k, s in enumerate(sessions):
        table.add_column(label(k, s), overflow="fold")
    rows: dict[str, list[str | Text]] = {
        "session": [str(s.session_id) for s in sessions],
        "status": [s.shown for s in sessions],
        "check": [s.check or "-" for s in sessions],
        "steps": [str(s.steps) for s in sessions],
        "tokens": [str(s.tokens) for s in sessions],
        "cost USD": [cost_words(s.cost_usd) for s in sessions],
        "wall time": [f"{s.seconds:.1f} s" for s in sessions],
        "first divergence": [Text(_parted(k, s)) for k, s in enumerate(sessions)],
        "final answer": [Text(_answer(s)) for s in sessions],
    }
    for name, cells in rows.items():
        table.add_row(name, *cells)
    return table


def _parted(index: int, s: SessionSummary) -> str:
    if index == 0:
        return "(compared with)"
    if s.divergence is None:
        return "none" if s.ended else "none so far"
    return str(s.divergence)


def _answer(s: SessionSummary) -> str:
    if s.answer is None:
        return "none (its last step called tools)"
    shown = one_line(s.answer, _ANSWER_WIDTH)
    if s.answer_chars > len(shown):
        shown = f"{shown.rstrip('…')}… ({s.answer_chars} characters)"
    return shown


def cost_words(cost: Decimal | None) -> str:
    # An unpriced reply makes the figure unknown: shown as such, never as a smaller number.
    return "unpriced" if cost is None else f"{cost:.6f}"


def _cell(view: StepView) -> Text:
    lines = [_call_line(c) for c in view.calls]
    if view.answered:
        lines.append("answer" if view.answer is None else f"answer ({view.answer})")
    text = Text("\n".join(lines))
    if view.diverged:
        text.append("\n◆ parts from 1 here", style="bold red")
    seconds = "-" if view.seconds is None else f"{view.seconds:.1f} s"
    tokens = f"{view.input_tokens} in, {view.output_tokens} out"
    text.append(f"\n{tokens} · {cost_words(view.cost_usd)} · {seconds}", style="dim")
    return text


def _call_line(c: CallView) -> str:
    name = one_line(c.name, _NAME_WIDTH)
    if c.another_call:
        name += " (another call)"
    elif c.other_keys:
        name += f" (other {one_line(', '.join(c.other_keys), _NAME_WIDTH)})"
    result = c.outcome if c.content is None else f"{c.outcome}, {c.content}"
    return f"{name} → {result}"
