"""agentctl demo: the whole product in one command, on the offline model or a local one."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from durable_agents.workers.cli.common import console, run_async
from durable_agents.workers.cli.local_model import ModelOption
from durable_agents.workers.stack.extra import require_devstack
from durable_agents.workers.stack.local_model import DEFAULT_MODEL


class DemoModel(StrEnum):
    offline = "offline"
    local = "local"


class DemoToolMode(StrEnum):
    auto = "auto"
    grammar = "grammar"
    native = "native"


def demo(
    interactive: Annotated[
        bool | None, typer.Option(help="Ask before approving (default: when on a terminal).")
    ] = None,
    model: Annotated[
        DemoModel, typer.Option(help="offline: the deterministic stand-in; local: llama.cpp.")
    ] = DemoModel.offline,
    local_model: ModelOption = DEFAULT_MODEL,
    tool_mode: Annotated[
        DemoToolMode,
        typer.Option(
            help="How the local model is offered tools: grammar (in the prompt, the reply "
            "held to one call or an answer), native (the request's tools), auto (grammar)."
        ),
    ] = DemoToolMode.auto,
) -> None:
    """Start a throwaway stack, run the demo task to completion, show what happened, stop.

    Exits 1 unless the task completed and wrote out/report.md naming the workspace's files;
    then, or when stopped, its state is kept and it says how to look at it.
    """
    require_devstack()
    from durable_agents.workers.demo.run import run_demo

    ask = sys.stdin.isatty() if interactive is None else interactive
    chosen = local_model if model is DemoModel.local else None
    demo_run = run_demo(console, interactive=ask, local_model=chosen, tool_mode=tool_mode.value)
    try:
        code = run_async(demo_run)
    except KeyboardInterrupt:
        # Ctrl-C: the demo stopped everything and said where its state is; no traceback.
        code = 130
    raise typer.Exit(code)
