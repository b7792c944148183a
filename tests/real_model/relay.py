"""A pass-through in front of llama-server for the real-model tier: what the tests put at the
model's HTTP interface (a fault, a recorder) relays every other request unchanged, a
streamed reply chunk by chunk as it comes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import ClientSession, ClientTimeout, web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def relay(
    request: web.Request, upstream: str, body: bytes
) -> tuple[web.StreamResponse, bytes]:
    """Send ``body`` to the server's Chat Completions and relay its reply to ``request``;
    (the response, every byte relayed). No client timeout: a CPU model takes minutes."""
    seen = b""
    async with (
        ClientSession(timeout=ClientTimeout(total=None)) as http,
        http.post(
            f"{upstream.rstrip('/')}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        ) as reply,
    ):
        response = web.StreamResponse(
            status=reply.status, headers={"Content-Type": reply.headers.get("Content-Type", "")}
        )
        await response.prepare(request)
        async for piece in reply.content.iter_any():
            seen += piece
            await response.write(piece)
        await response.write_eof()
    return response, seen


@asynccontextmanager
async def serving(handler: Handler, props_of: str | None = None) -> AsyncIterator[str]:
    """Serve ``handler`` as Chat Completions on a free loopback port; yields its base URL.
    ``props_of``: the server whose ``GET /props`` is answered too, so the provider's tool
    mode (auto) finds llama.cpp's server behind it as it would without the fault."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    if props_of is not None:
        root = props_of.rstrip("/").removesuffix("/v1")

        async def props(_: web.Request) -> web.Response:
            async with ClientSession() as http, http.get(f"{root}/props") as reply:
                return web.Response(
                    status=reply.status, body=await reply.read(), content_type="application/json"
                )

        app.router.add_get("/props", props)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()
