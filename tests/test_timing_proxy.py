"""bench/real_model.py's timing proxy with streaming on (issue 30, finding 5): it relays a
streamed reply as it comes, reads llama.cpp's `timings` from its chunks, and passes a whole
reply or a server error through unchanged. The server is faked at its HTTP interface as
llama-server streams (a final chunk carrying `timings`); no real model."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp import web

from durable_agents.activities.providers.base import ChatMessage, ModelRequest
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider

BENCH = Path(__file__).resolve().parents[1] / "bench"
TIMINGS = {"prompt_n": 120, "prompt_ms": 1500.0, "predicted_n": 30, "predicted_ms": 3000.0}


def _bench_module(name: str) -> ModuleType:
    # bench/ is not a package: its scripts import each other with bench/ on sys.path.
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


timing_proxy = _bench_module("timing_proxy")


class _LlamaLike:
    """Streams as llama-server does: role, content pieces, a final chunk with `timings`."""

    def __init__(self) -> None:
        self.first_piece_sent = asyncio.Event()
        self.go_on = asyncio.Event()
        self.status = 200

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.status != 200:
            return web.json_response({"error": {"message": "boom"}}, status=self.status)
        if not body.get("stream"):
            message = {"role": "assistant", "content": "Hello there."}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return web.json_response(
                {"object": "chat.completion", "model": "m", "choices": [choice], "timings": TIMINGS}
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for n, delta in enumerate(({"role": "assistant", "content": ""}, {"content": "Hello"})):
            await self._send(response, {"choices": [{"index": 0, "delta": delta}]})
            if n == 1:
                self.first_piece_sent.set()
                await self.go_on.wait()  # held until the client has seen "Hello"
        await self._send(response, {"choices": [{"index": 0, "delta": {"content": " there."}}]})
        final = {"index": 0, "delta": {}, "finish_reason": "stop"}
        await self._send(response, {"choices": [final], "timings": TIMINGS})
        usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
        await self._send(response, {"choices": [], "usage": usage})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    @staticmethod
    async def _send(response: web.StreamResponse, chunk: dict[str, Any]) -> None:
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m", **chunk}
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())


@pytest.fixture(name="upstream")
async def llama_like() -> AsyncIterator[tuple[_LlamaLike, str]]:
    fake = _LlamaLike()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield fake, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    await runner.cleanup()


def _request(on_text: Any = None) -> ModelRequest:
    return ModelRequest("m", [ChatMessage("user", "hi")], [], "key-1", on_text=on_text)


async def test_a_streamed_reply_is_relayed_as_it_comes_and_its_timings_are_kept(
    upstream: tuple[_LlamaLike, str],
) -> None:
    fake, url = upstream
    proxy = timing_proxy.TimingProxy(url)
    pieces: list[str] = []

    async def heard(piece: str) -> None:
        pieces.append(piece)
        if piece == "Hello":
            fake.go_on.set()  # the server finishes only once the client heard the first piece

    async with timing_proxy.serving(proxy):
        provider = OpenAICompatibleProvider(proxy.url, None, "m", timeout=10)
        try:
            reply = await asyncio.wait_for(provider.complete(_request(heard)), 10)
        finally:
            await provider.aclose()

    assert reply.text == "Hello there." and pieces == ["Hello", " there."]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (120, 30)
    t = proxy.current
    assert len(t.wall) == 1 and t.unread == 0
    assert (t.prompt_tokens, t.prompt_ms, t.predicted_tokens, t.predicted_ms) == (
        120,
        1500.0,
        30,
        3000.0,
    )


async def test_a_whole_reply_and_a_server_error_pass_through(
    upstream: tuple[_LlamaLike, str],
) -> None:
    fake, url = upstream
    proxy = timing_proxy.TimingProxy(url)
    async with timing_proxy.serving(proxy):
        provider = OpenAICompatibleProvider(proxy.url, None, "m", timeout=10)
        try:
            reply = await provider.complete(_request())
            fake.status = 503
            with pytest.raises(Exception) as failed:
                await provider.complete(_request())
        finally:
            await provider.aclose()

    assert reply.text == "Hello there."
    assert "503" in str(failed.value)  # the server's status, not one of the proxy's own
    t = proxy.current
    assert len(t.wall) == 2 and t.predicted_tokens == 30
