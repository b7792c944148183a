"""A cap on request body size, checked as the body arrives.

A Content-Length over the cap is refused before anything is read; a chunked body is
counted as it streams in and refused the moment it passes the cap, so no request makes
the process buffer more than the cap (pydantic reads a JSON body whole).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_agents.workers.gateway.errors import error_response


class BodyTooLarge(HTTPException):
    """An HTTPException so FastAPI's body reading passes it on as it is (as a 413)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request bodies are limited to {max_bytes} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                err = BodyTooLarge(self.max_bytes)
                await error_response(413, "too_large", str(err.detail))(scope, receive, send)
                return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, counted, send)
