"""The security headers of every gateway answer, set in one place around the whole app.

The web page's document (`/`) gets a policy that runs only its own scripts and styles.
Everything else — JSON, the OpenAPI schema, errors, the event stream, artifact bytes, the
page's own script and style files (a policy on them is ignored where the page loads them)
— is never a page: its policy sandboxes it, so even a body a browser did render as HTML
would run in an opaque origin, without the page's sessionStorage (where the signed-in key
lives) and without script. Nothing can frame the gateway, no answer is content-sniffed, no URL
leaks through Referer, and other origins cannot embed its answers (CORP).

`SecuredApp` wraps the outermost layer, so an answer made by Starlette's own error
middleware (an unhandled exception's 500) carries the headers as well.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_PAGE_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
_API_POLICY = "; ".join(
    [
        "default-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "sandbox",
    ]
)
_COMMON = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
PAGE_HEADERS = {**_COMMON, "Content-Security-Policy": _PAGE_POLICY}
API_HEADERS = {**_COMMON, "Content-Security-Policy": _API_POLICY}


# The web page's document, at its two addresses: the only HTML of the gateway with script.
PAGE_PATHS = frozenset({"/", "/web/index.html"})


class SecurityHeaders:
    """ASGI middleware: sets the headers on every HTTP answer, replacing a route's own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chosen = PAGE_HEADERS if scope["path"] in PAGE_PATHS else API_HEADERS

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in chosen.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_secured)


class SecuredApp(FastAPI):
    """A FastAPI app whose every answer, its 500s included, carries SecurityHeaders."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())
