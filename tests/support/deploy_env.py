"""What a deployment file (docker-compose.yml, workers/deploy/k8s/) may set and run, read
from the code it deploys: agentctl's own command tree and settings, and the Temporal SDK's
env config. No Docker engine or cluster is involved."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from pydantic import SecretStr
from pydantic_settings import BaseSettings
from temporalio.envconfig import ClientConfig

from durable_agents.workers.cli.main import app
from durable_agents.workers.settings import (
    AgentSettings,
    DatabaseSettings,
    GatewaySettings,
    ModelSettings,
    S3Settings,
    TelemetrySettings,
)

ROOT = Path(__file__).resolve().parents[2]
# The one image that runs agentctl (workers/Dockerfile), in compose and in the manifests.
AGENT_IMAGE = "durable-agents"
GROUPS: tuple[type[BaseSettings], ...] = (
    DatabaseSettings,
    S3Settings,
    ModelSettings,
    AgentSettings,
    TelemetrySettings,
    GatewaySettings,
)
PREFIXES = tuple(str(g.model_config["env_prefix"]) for g in GROUPS)
# The schema owner's URL: only the migration may hold it, never a worker or the gateway.
MIGRATION_ONLY = "DATABASE_MIGRATION_URL"


def env_name(group: type[BaseSettings], field: str) -> str:
    return str(group.model_config["env_prefix"]) + field.upper()


def settings_env() -> set[str]:
    """Every variable workers/settings.py reads."""
    return {env_name(g, f) for g in GROUPS for f in g.model_fields}


def secret_env() -> set[str]:
    """The settings that hold credentials (SecretStr): only ever set from a secret store."""
    return {
        env_name(g, f)
        for g in GROUPS
        for f, info in g.model_fields.items()
        if SecretStr in (info.annotation, *getattr(info.annotation, "__args__", ()))
    }


def temporal_sdk_reads(name: str, value: str = "x.example:7233") -> bool:
    """Whether the Temporal SDK's env config changes with `name` set (it is its variable)."""

    def load(env: dict[str, str]) -> object:
        return ClientConfig.load_client_connect_config(disable_file=True, override_env_vars=env)

    try:
        return load({name: value}) != load({})
    except (RuntimeError, ValueError):  # read, and refused as that value
        return True


def unknown_agent_env(names: Iterable[str]) -> set[str]:
    """Names neither our settings nor the Temporal SDK read."""
    known = settings_env()
    return {n for n in names if n not in known and not temporal_sdk_reads(n)}


def agentctl_error(argv: list[str]) -> str | None:
    """Parse `argv` as agentctl does, without running it: None if it names a real
    subcommand with real flags and valid values, else why not."""
    if argv[:1] != ["agentctl"]:
        return f"not agentctl: {argv[:1]}"
    # Typer's own (vendored) click: groups have `commands`, leaves parse with make_context.
    command: Any = typer.main.get_command(app)
    args, path = list(argv[1:]), ["agentctl"]
    while hasattr(command, "commands") and args and args[0] in command.commands:
        path.append(args.pop(0))
        command = command.commands[path[-1]]
    if hasattr(command, "commands") and not command.invoke_without_command:
        return f"{' '.join(path)}: no such subcommand {args[:1]}"
    try:
        command.make_context(" ".join(path), args)
    except Exception as err:  # click's usage errors (NoSuchOption, BadParameter, ...)
        if not hasattr(err, "format_message"):
            raise
        return f"{' '.join(path)}: {err.format_message()}"
    return None


class _Stub:
    """Stands in for the resources and client the gateway app only stores at build time."""

    sessions = None
    store = type("Store", (), {"prefix": "artifacts"})()


def gateway_health_path() -> str:
    """The path of the gateway's health route, asked of its app (workers/gateway/app.py)."""
    from durable_agents.workers.gateway.app import create_app
    from durable_agents.workers.settings import Settings

    app = create_app(_Stub(), _Stub(), Settings())  # type: ignore[arg-type]
    return str(app.url_path_for("healthz"))
