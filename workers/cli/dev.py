"""agentctl dev: the embedded stack (Temporal, PostgreSQL, SeaweedFS) for development."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from durable_agents.workers.cli.common import run_async
from durable_agents.workers.dev_env import DEV_ENV_FILE
from durable_agents.workers.stack.extra import require_devstack

dev_app = typer.Typer(no_args_is_help=True, help="The embedded stack for development.")


# 0 lets the stack pick a free port (it prints the ones it chose).
Port = Annotated[int, typer.Option(min=0, max=65535)]


class ProviderName(StrEnum):
    """The MODEL_PROVIDER values (durable_agents.workers.settings.ModelSettings.provider)."""

    offline = "offline"
    scripted = "scripted"
    openai = "openai"
    anthropic = "anthropic"


@dev_app.command("up")
def dev_up(
    state_dir: Annotated[
        Path, typer.Option(file_okay=False, help="Where the stack keeps its data.")
    ] = DEV_ENV_FILE.parent,
    temporal_port: Port = 7233,
    postgres_port: Port = 54329,
    s3_port: Port = 8333,
    ui: Annotated[bool, typer.Option(help="Serve the Temporal Web UI.")] = True,
    model_provider: Annotated[
        ProviderName | None, typer.Option(help="The model (else MODEL_PROVIDER).")
    ] = None,
    gateway_port: Annotated[
        int, typer.Option(min=0, max=65535, help="The gateway's port on 127.0.0.1 (0: any).")
    ] = 8000,
) -> None:
    """Run Temporal, PostgreSQL, SeaweedFS, a cloud worker and the gateway in the foreground."""
    require_devstack()
    from durable_agents.workers.cli.devup import dev_up as run_dev_up

    provider = model_provider.value if model_provider else None
    run_async(
        run_dev_up(state_dir, temporal_port, postgres_port, s3_port, ui, provider, gateway_port)
    )
