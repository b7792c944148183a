"""A NUL character in a request's path or query is refused (400) before any route runs:
PostgreSQL's text type refuses it, so it would otherwise surface as a database error (a
500) wherever a parameter reaches a query, as `GET /v1/usage?agent=%00` did."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from durable_agents.workers.gateway.errors import error_response


class UrlText:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            raw = scope.get("raw_path") or scope.get("path", "").encode()
            query = scope.get("query_string", b"")
            if any(b"\x00" in unquote_to_bytes(part) for part in (raw, query)):
                where = "query" if b"\x00" in unquote_to_bytes(query) else "path"
                message = f"the request's {where} contains a NUL character (U+0000)"
                await error_response(400, "invalid_request", message)(scope, receive, send)
                return
        await self.app(scope, receive, send)
