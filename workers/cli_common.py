"""What every agentctl command shares: consoles, the tenant option, running async work
against the configured PostgreSQL and S3."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from workers.resources import Resources, open_resources
from workers.settings import get_settings

# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; timelines read better wider.
console = Console(width=None if sys.stdout.isatty() else 120)
err_console = Console(stderr=True)
T = TypeVar("T")

Tenant = Annotated[
    str | None, typer.Option("--tenant", help="Tenant id (default: AGENT_TENANT_ID).")
]


def tenant_or_default(tenant: str | None) -> str:
    return tenant or get_settings().agent.tenant_id


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def with_resources(fn: Callable[[Resources], Awaitable[T]]) -> T:
    s = get_settings()
    async with open_resources(s.database, s.s3) as res:
        return await fn(res)
