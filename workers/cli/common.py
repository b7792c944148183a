"""What every agentctl command shares: consoles, the tenant option, parsing ids, running
async work against the configured PostgreSQL, S3 and Temporal."""

from __future__ import annotations

import asyncio
import getpass
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client

from durable_agents.storage.artifacts import check_user_tenant
from durable_agents.storage.items import MAX_ORDINAL
from durable_agents.workers.cli.errors import ServiceUnavailable
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.tasks import session_uuid
from durable_agents.workers.resources import Resources, open_resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.temporal_client import connect_client

# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; timelines read better wider.
console = Console(width=None if sys.stdout.isatty() else 120)
err_console = Console(stderr=True)
T = TypeVar("T")

After = Annotated[int, typer.Option(min=0, max=MAX_ORDINAL, help="Start after this item ordinal.")]

Tenant = Annotated[
    str | None, typer.Option("--tenant", help="Tenant id (default: AGENT_TENANT_ID).")
]


def tenant_or_default(tenant: str | None) -> str:
    """The tenant to act as, checked: --tenant, else AGENT_TENANT_ID."""
    return check_user_tenant(tenant or get_settings().agent.tenant_id)


def operator_name() -> str:
    """Who a decision from this shell (a loosening, a budget raise) is recorded as: the OS
    user, as `cli:NAME`."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = "unknown"
    return f"cli:{name[:64]}"


def session_id(text: str) -> str:
    """A session id as typed, checked and in the one spelling its workflow id uses."""
    return str(session_uuid(text))


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def temporal_client() -> Client:
    """The configured Temporal client; a refused connection is ServiceUnavailable."""
    try:
        return await connect_client()
    except ValueError as err:  # the SDK's "invalid target URL: ..."
        raise ValueError(f"TEMPORAL_ADDRESS: {err}") from None
    except RuntimeError as err:
        # The SDK reports a failed connect as a RuntimeError ("Failed client connect: ...").
        if "connect" not in str(err).lower():
            raise
        raise ServiceUnavailable("Temporal", "TEMPORAL_ADDRESS", str(err)) from err


DATABASE_URL_SHAPE = "postgresql+asyncpg://USER[:PASSWORD]@HOST:PORT/DB"


def check_database_url(url: str) -> None:
    """Refuse a DATABASE_URL that is not postgresql+asyncpg."""
    # Neither message quotes the URL: it may hold a password.
    try:
        driver = make_url(url).drivername
    except (ArgumentError, ValueError):
        raise ValueError(f"DATABASE_URL is not a database URL ({DATABASE_URL_SHAPE})") from None
    if driver != "postgresql+asyncpg":
        raise ValueError(f"DATABASE_URL must be {DATABASE_URL_SHAPE}, not {driver}://...")


async def _check_postgres(engine: AsyncEngine) -> None:
    # Connect once up front, so an unreachable database is named as such rather than
    # surfacing as a bare socket error from whichever query happens to run first.
    try:
        async with engine.connect():
            pass
    except Exception as err:
        detail = getattr(err, "orig", None) or err
        where = f"{engine.url.host}:{engine.url.port}"
        raise ServiceUnavailable("PostgreSQL", "DATABASE_URL", f"{where}: {detail}") from err


def as_operator(tenant: str | None, by: str | None = None) -> Caller:
    """Who this shell acts as: the deployment's operator, for --tenant (else
    AGENT_TENANT_ID), recorded as `by` (else the OS user, operator_name)."""
    return Caller.operator(tenant_or_default(tenant), user_id=by or operator_name())


async def with_service(fn: Callable[[TaskService], Awaitable[T]]) -> T:
    """Run `fn` with the one service, on the configured PostgreSQL, S3 and Temporal."""

    async def go(res: Resources) -> T:
        return await fn(
            TaskService(await temporal_client(), res.sessions, res.store, get_settings())
        )

    return await with_resources(go)


async def with_resources(fn: Callable[[Resources], Awaitable[T]]) -> T:
    s = get_settings()
    check_database_url(s.database.url.get_secret_value())
    async with open_resources(s.database, s.s3) as res:
        await _check_postgres(res.engine)
        return await fn(res)
