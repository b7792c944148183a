"""The gateway's FastAPI app: REST under /v1, its OpenAPI schema at /openapi.json.

No HTML docs (/docs, /redoc): FastAPI's load Swagger UI and ReDoc from a CDN, a third
party's script on the origin where the web page keeps its key, and no package here ships
their files. Every answer carries the same security headers (security_headers.py).

`create_app` takes what the process already opened (resources, a Temporal client,
settings), so tests and `agentctl gateway` build it the same way. Routers: tasks, sessions,
the event stream (Server-Sent Events) and the device routes, which share one LISTEN
connection per process (storage/listener.py, opened by the first stream or poll), and the
web page at `/` (workers/gateway/page.py); each API route states its scope with
durable_agents.workers.gateway.auth.require.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from temporalio.client import Client

from durable_agents.storage.listener import Listener
from durable_agents.storage.session_events import EventHub, listen_dsn
from durable_agents.workers.device_dispatch.calls import DeviceCalls
from durable_agents.workers.device_dispatch.wakes import DeviceWakes
from durable_agents.workers.gateway import (
    page,
    routes_budget,
    routes_compare,
    routes_devices,
    routes_events,
    routes_sessions,
    routes_tasks,
    routes_tenant,
    routes_usage,
)
from durable_agents.workers.gateway.body_limit import BodyLimit
from durable_agents.workers.gateway.context import Gateway
from durable_agents.workers.gateway.errors import install_error_handlers
from durable_agents.workers.gateway.key_holds import POLL, STREAM, OpenHolds
from durable_agents.workers.gateway.rate_limit import RateLimiter, SharedRateLimiter
from durable_agents.workers.gateway.security_headers import SecuredApp
from durable_agents.workers.gateway.url_text import UrlText
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import Settings

# Client addresses whose failed authentications are remembered at once (memory bound).
MAX_THROTTLED_ADDRESSES = 100_000


def create_app(resources: Resources, client: Client, settings: Settings) -> FastAPI:
    """The gateway app, serving with these resources as the tenants of its API keys."""
    listener = Listener(listen_dsn(settings.database.url.get_secret_value()))
    hub = EventHub(listener)
    limits = settings.gateway
    holds = OpenHolds(
        resources.sessions,
        {STREAM: limits.max_streams_per_key, POLL: limits.max_polls_per_key},
        recheck_seconds=limits.key_recheck_seconds,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await listener.aclose()  # the LISTEN connection, if a stream or a poll opened it
        await holds.aclose()  # the re-check of open streams' keys

    app = SecuredApp(
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        title="durable-agents gateway",
        version="1",
        description="Start, steer and read durable agent tasks. Authenticate with "
        "`Authorization: Bearer <key>` (`agentctl keys create`).",
    )
    app.state.gateway = Gateway(
        resources,
        client,
        settings,
        SharedRateLimiter(resources.sessions, limits.rate_per_second, limits.burst),
        hub,
        auth_failures=RateLimiter(
            limits.auth_failure_rate_per_second,
            limits.auth_failure_burst,
            max_keys=MAX_THROTTLED_ADDRESSES,
        ),
        holds=holds,
    )
    app.state.device_calls = DeviceCalls(
        resources.sessions,
        resources.store,
        client,
        DeviceWakes(listener),
        lease_seconds=limits.device_lease_seconds,
    )
    install_error_handlers(app)

    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    app.add_middleware(UrlText)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(routes_tasks.router)
    app.include_router(routes_sessions.router)
    app.include_router(routes_usage.router)
    app.include_router(routes_compare.router)
    app.include_router(routes_budget.router)
    app.include_router(routes_tenant.router)
    app.include_router(routes_events.router)
    app.include_router(routes_devices.router)
    app.include_router(page.router)
    app.mount("/web", page.static_files(), name="web")
    return app
