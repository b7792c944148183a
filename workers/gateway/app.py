"""The gateway's FastAPI app: REST under /v1, OpenAPI at /docs and /openapi.json.

`create_app` takes what the process already opened (resources, a Temporal client,
settings), so tests and `agentctl gateway` build it the same way. More routers (the event
stream, the web page) are added with `app.include_router(...)`, reusing
workers.gateway.auth.require for their scopes.
"""

from __future__ import annotations

from fastapi import FastAPI
from temporalio.client import Client

from workers.gateway import routes_sessions, routes_tasks
from workers.gateway.body_limit import BodyLimit
from workers.gateway.context import Gateway
from workers.gateway.errors import install_error_handlers
from workers.gateway.rate_limit import RateLimiter
from workers.resources import Resources
from workers.settings import Settings


def create_app(resources: Resources, client: Client, settings: Settings) -> FastAPI:
    """The gateway app, serving with these resources as the tenants of its API keys."""
    app = FastAPI(
        title="durable-agents gateway",
        version="1",
        description="Start, steer and read durable agent tasks. Authenticate with "
        "`Authorization: Bearer <key>` (`agentctl keys create`).",
    )
    limits = settings.gateway
    app.state.gateway = Gateway(
        resources, client, settings, RateLimiter(limits.rate_per_second, limits.burst)
    )
    install_error_handlers(app)

    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(routes_tasks.router)
    app.include_router(routes_sessions.router)
    return app
