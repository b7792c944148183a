"""The gateway app for tests: built by create_app on the real stack, spoken to over
httpx's ASGI transport (the real app, its middleware and error handlers) or served by
uvicorn on a loopback port (for a browser), and API keys created through the real
repository."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from temporalio.client import Client

from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints


async def make_key(res: Resources, tenant: str, *scopes: str, user: str = "ann", **kw: Any) -> str:
    """A new API key's full text (`da_<id>_<secret>`)."""
    async with res.sessions() as db, db.begin():
        return (await ApiKeyRepository(db).create(tenant, user, scopes, **kw)).key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def session_status(http: httpx.AsyncClient, key: str, sid: str) -> str:
    """The session's status as the gateway shows it (AgentState's)."""
    answer = await http.get(f"/v1/sessions/{sid}", headers=bearer(key))
    status: str = answer.json()["session"]["status"]
    return status


@asynccontextmanager
async def gateway_http(
    stack: StackEndpoints,
    res: Resources,
    client: Client,
    *,
    queue: str = "unused",
    workspace: Path = Path("unused"),
    gateway: GatewaySettings | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client to a fresh gateway app whose tasks go to `queue`."""
    app = _app(stack, res, client, queue, workspace, gateway)
    # raise_app_exceptions=False: a 500 is answered as the app answers it, not re-raised.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield http


def _app(
    stack: StackEndpoints,
    res: Resources,
    client: Client,
    queue: str,
    workspace: Path,
    gateway: GatewaySettings | None,
) -> FastAPI:
    settings = stack.settings(workspace=workspace, task_queue=queue, provider="scripted")
    settings.gateway = gateway or GatewaySettings(rate_per_second=1000, burst=1000)
    return create_app(res, client, settings)


@asynccontextmanager
async def gateway_server(
    stack: StackEndpoints,
    res: Resources,
    client: Client,
    *,
    queue: str,
    workspace: Path,
    gateway: GatewaySettings | None = None,
) -> AsyncIterator[str]:
    """A fresh gateway app served over real HTTP on 127.0.0.1 (uvicorn, in this event
    loop) for as long as the block runs; its base URL."""
    app = _app(stack, res, client, queue, workspace, gateway)
    async with serving(app) as url:
        yield url


async def poll(
    fetch: Callable[[], Any], until: Callable[[Any], bool], within_seconds: float = 30
) -> Any:
    """Call `fetch` until `until(result)`; the last result. Timed out, the error names the
    last result seen."""
    result: Any = None
    try:
        async with asyncio.timeout(within_seconds):
            while True:
                result = await fetch()
                if until(result):
                    return result
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise TimeoutError(f"not reached in {within_seconds:g} s; last seen: {result!r}") from None
