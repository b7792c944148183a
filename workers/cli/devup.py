"""`agentctl dev up`: the embedded stack plus a cloud worker and the gateway, in the
foreground."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from durable_agents.storage.db import migrate
from durable_agents.workers.cli.devup_signals import StopOnSignals
from durable_agents.workers.client.gateway_client import KEY_ENV, URL_ENV
from durable_agents.workers.demo import DEMO_WORKSPACE
from durable_agents.workers.dev_env import DEV_ENV_FILE, export_lines, user_record
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.process.run import run_cloud_worker
from durable_agents.workers.resources import open_resources
from durable_agents.workers.settings import (
    DEV_HEARTBEAT_THROTTLE_SECONDS,
    ModelSettings,
    Settings,
    get_settings,
)
from durable_agents.workers.stack import DevStack
from durable_agents.workers.stack.private_file import write_private_file
from durable_agents.workers.temporal_client import connect_client

console = Console()

ENV_FILE = DEV_ENV_FILE.name  # in the state dir
# What a new session's workspace starts with; dev up seeds with the demo's files.
SEED_ENV = "AGENT_WORKSPACE_SEED"
# Never printed: they go to the env file only.
SECRET_ENV = frozenset({"DATABASE_URL", "DATABASE_MIGRATION_URL", "S3_SECRET_ACCESS_KEY"})


async def dev_up(
    state_dir: Path,
    temporal_port: int,
    postgres_port: int,
    s3_port: int,
    ui: bool,
    model_provider: str | None,
    gateway_port: int = 8000,
) -> None:
    base = get_settings()
    provider = model_provider or base.model.provider
    if provider is None:
        raise ValueError(
            "choose a model: --model-provider offline (deterministic, no network) or set "
            "MODEL_PROVIDER=openai|anthropic with MODEL_BASE_URL / MODEL_API_KEY"
        )
    stack = RecordedStack(
        DevStack(
            state_dir,
            temporal_port=temporal_port,
            postgres_port=postgres_port,
            s3_port=s3_port,
            ui=ui,
        )
    )
    stop = asyncio.Event()
    with StopOnSignals(stack, stop) as signals:
        try:
            await _serve(stack, base, provider, gateway_port, stop, signals)
        except asyncio.CancelledError:
            if signals.signalled is None:
                raise
        finally:
            # Also when start-up was cancelled half way: stop waits for it to give up.
            await asyncio.to_thread(stack.stop)


class RecordedStack:
    """The stack, and its record in the per-user state file (workers/dev_env.py) once it
    serves: stopping the stack removes the record, the signal watchdog's stop included."""

    def __init__(self, stack: DevStack) -> None:
        self.stack = stack
        self.path = user_record()
        self._text: str | None = None

    def record(self, env: Mapping[str, str]) -> None:
        """Record the running stack, whose variables are env, for agentctl in any directory."""
        text = f"# agentctl dev up, state in {self.stack.state_dir}\n" + export_lines(env)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private_file(self.path, text)
        self._text = text

    def stop(self, *, now: bool = False) -> None:
        # Another dev up may have recorded its own stack since: that record stays.
        with contextlib.suppress(OSError):
            if self._text is not None and self.path.read_text() == self._text:
                self.path.unlink()
        self.stack.stop(now=now)


async def _serve(
    recorded: RecordedStack,
    base: Settings,
    provider: str,
    gateway_port: int,
    stop: asyncio.Event,
    signals: StopOnSignals,
) -> None:
    stack = recorded.stack
    ep = await asyncio.to_thread(stack.start)
    # The worker and any agentctl started from this process read the same variables.
    os.environ.update(ep.env())
    env_file = write_env_file(stack.state_dir / ENV_FILE, ep.env())
    await migrate(ep.database_migration_url)
    recorded.record(ep.env())
    console.print("[bold]durable-agents dev stack is up[/] (Ctrl-C stops everything)")
    for name, value in ep.env().items():
        if name not in SECRET_ENV:
            console.print(f"  export {name}={value}", highlight=False, soft_wrap=True)
    console.print(
        f"  and the passwords: . {env_file}  (all of the above; readable only by you)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if ep.temporal_ui_url:
        console.print(f"  Temporal Web UI: {ep.temporal_ui_url}")
    agent = base.agent
    if agent.heartbeat_throttle_seconds is None:
        # A local Temporal bills no heartbeat: a cancel reaches a model call promptly.
        agent = agent.model_copy(
            update={"heartbeat_throttle_seconds": DEV_HEARTBEAT_THROTTLE_SECONDS}
        )
    if SEED_ENV not in os.environ and agent.workspace_seed is None:  # set, even empty: theirs
        agent = agent.model_copy(update={"workspace_seed": DEMO_WORKSPACE})
        console.print(f"  new sessions start with the demo files ({SEED_ENV})")
    settings = Settings(
        model=ModelSettings.model_validate({**base.model.model_dump(), "provider": provider}),
        agent=agent,
    )
    async with open_resources(settings.database, settings.s3) as res:
        client = await connect_client(data_converter=data_converter_with_offload(res.store))
        async with serving(create_app(res, client, settings), port=gateway_port) as url:
            console.print(
                f"  gateway: {url} (web page: {url}/, API schema: {url}/openapi.json)",
                highlight=False,
                soft_wrap=True,
            )
            console.print(
                f"    a key: agentctl keys create --tenant {settings.agent.tenant_id} "
                "--user you --scope read --scope start --scope approve\n"
                f"    then: {URL_ENV}={url} {KEY_ENV}=<key> agentctl watch SESSION",
                markup=False,
                highlight=False,
                soft_wrap=True,  # whole commands, to copy
            )
            console.file.flush()  # read by whoever waits for the stack (a pipe too)
            logging.getLogger().setLevel(logging.INFO)
            await run_cloud_worker(settings, stop, ready=signals.serving)


def write_env_file(path: Path, env: Mapping[str, str]) -> Path:
    """The stack's variables as `export` lines for a shell to source, 0600: they hold the
    database passwords, which are never printed."""
    write_private_file(
        path, "# agentctl dev up: `. " + path.name + "` in another terminal\n" + export_lines(env)
    )
    return path
