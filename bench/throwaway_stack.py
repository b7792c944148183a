"""A throwaway embedded stack for benchmark scripts: started, migrated, torn down."""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from durable_agents.storage.db import migrate
from durable_agents.workers.resources import Resources, open_resources
from durable_agents.workers.stack import DevStack, StackEndpoints


def _state_dir(keep: Path | None = None) -> Path:
    if keep is None:
        state = Path(tempfile.mkdtemp(prefix="durable-agents-bench-"))
    else:
        state = keep.absolute()
        state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o755)  # as root, PostgreSQL runs as an unprivileged user who must enter it
    return state


@asynccontextmanager
async def bench_resources() -> AsyncIterator[Resources]:
    """PostgreSQL (migrated) and S3 (bucket ready) on free ports, gone afterwards."""
    state = await asyncio.to_thread(_state_dir)
    stack = DevStack(state, temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    try:
        ep = await asyncio.to_thread(stack.start)
        await migrate(ep.database_migration_url)
        settings = ep.settings(workspace=state, task_queue="bench", provider="offline")
        async with open_resources(settings.database, settings.s3) as res:
            await res.store.ensure_bucket()
            yield res
    finally:
        await asyncio.to_thread(stack.stop)
        shutil.rmtree(state, ignore_errors=True)


def _cancel_on_sigterm() -> None:
    """A kill (SIGTERM, what `pkill` sends) cancels the bench's main task, so the stack's
    `finally` stops its servers; by default the process would die and leave them running."""
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


@asynccontextmanager
async def bench_stack(
    *, fairness: bool = True, keep: Path | None = None
) -> AsyncIterator[tuple[StackEndpoints, Resources, Path]]:
    """Like bench_resources, plus the endpoints (Temporal too) and the state dir.
    `fairness`: the Temporal server's fairness across tenants (on, as the dev stack's).
    `keep`: the state dir to use and leave in place (a stack started there before starts
    again from its state); by default a new one, removed at the end."""
    state = await asyncio.to_thread(_state_dir, keep)
    stack = DevStack(state, temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    stack.temporal.fairness = fairness
    _cancel_on_sigterm()
    try:
        ep = await asyncio.to_thread(stack.start)
        await migrate(ep.database_migration_url)
        settings = ep.settings(workspace=state, task_queue="bench", provider="offline")
        async with open_resources(settings.database, settings.s3) as res:
            await res.store.ensure_bucket()
            yield ep, res, state
    finally:
        await asyncio.to_thread(stack.stop)
        if keep is None:
            shutil.rmtree(state, ignore_errors=True)


@asynccontextmanager
async def bench_devstack() -> AsyncIterator[tuple[DevStack, StackEndpoints, Resources, Path]]:
    """Like bench_stack, plus the DevStack itself (e.g. for the Temporal server's metrics)."""
    state = await asyncio.to_thread(_state_dir)
    stack = DevStack(state, temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    _cancel_on_sigterm()
    try:
        ep = await asyncio.to_thread(stack.start)
        await migrate(ep.database_migration_url)
        settings = ep.settings(workspace=state, task_queue="bench", provider="offline")
        async with open_resources(settings.database, settings.s3) as res:
            await res.store.ensure_bucket()
            yield stack, ep, res, state
    finally:
        await asyncio.to_thread(stack.stop)
        shutil.rmtree(state, ignore_errors=True)
