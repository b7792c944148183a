"""The gateway's FastAPI app: REST under /v1, OpenAPI at /docs and /openapi.json.

`create_app` takes what the process already opened (resources, a Temporal client,
settings), so tests and `agentctl gateway` build it the same way. More routers (the event
stream, the web page) are added with `app.include_router(...)`, reusing
workers.gateway.auth.require for their scopes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from temporalio.client import Client

from workers.gateway import routes_sessions, routes_tasks
from workers.gateway.context import Gateway
from workers.gateway.errors import error_response, install_error_handlers
from workers.gateway.rate_limit import RateLimiter
from workers.resources import Resources
from workers.settings import Settings

# Far above any text a task accepts inline (AGENT_MAX_TASK_BYTES and friends apply after);
# refusing larger bodies up front keeps one request from making the process buffer them.
MAX_BODY_BYTES = 8 * 1024 * 1024


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

    @app.middleware("http")
    async def refuse_large_bodies(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return error_response(413, "too_large", f"bodies are limited to {MAX_BODY_BYTES} bytes")
        return await call_next(request)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(routes_tasks.router)
    app.include_router(routes_sessions.router)
    return app
