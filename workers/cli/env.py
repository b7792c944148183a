"""agentctl env: the dev stack this shell's agentctl uses, as `export` lines a shell can
eval (`eval "$(agentctl env)"`): variables set here over `agentctl dev up`'s record."""

from __future__ import annotations

import typer

from durable_agents.workers.dev_env import export_lines, stack_env


def env() -> None:
    """The dev stack agentctl here uses, as `export` lines, passwords included."""
    typer.echo(export_lines(stack_env()), nl=False)
