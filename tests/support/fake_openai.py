"""A fake Chat Completions server on localhost: the remote LLM, faked at its HTTP interface.

A request with ``"stream": true`` is answered with the same reply as Server-Sent Events
chunks (``answer``), so a test works whether the provider streams or not.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class FakeOpenAI:
    """A tiny Chat Completions endpoint: canned reply, programmable failures, a request log."""

    requests: list[Recorded] = field(default_factory=list)
    status: int = 200
    reply: dict[str, Any] = field(default_factory=dict)
    # Replies sent, in order, before `reply`: a conversation of several steps.
    queued: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    url: str = ""
    # Streamed requests (0-based index into `requests`) whose connection drops after this
    # many chunks: a server or network that fails in the middle of a reply.
    drop_after: dict[int, int] = field(default_factory=dict)
    # Pause between streamed chunks.
    chunk_delay: float = 0.0
    # Set: each request waits for it before it is answered.
    hold: asyncio.Event | None = None
    # GET /props answers this (llama.cpp's server says who it is there); None: 404.
    props: dict[str, Any] | None = None
    props_status: int = 200
    props_requests: int = 0

    def fail(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.reply = {"error": {"message": message, "type": "fake_error", "code": None}}
        self.headers = headers or {}

    async def get_props(self, request: web.Request) -> web.Response:
        self.props_requests += 1
        if self.props_status != 200:
            return web.json_response({"error": "unavailable"}, status=self.props_status)
        if self.props is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(self.props)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        number = len(self.requests)
        self.requests.append(Recorded(body, dict(request.headers)))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.hold is not None:
            await self.hold.wait()
        reply = self.queued.pop(0) if self.queued else self.reply
        if self.status != 200:
            return web.json_response(reply, status=self.status, headers=self.headers)
        drop = self.drop_after.get(number)
        return await answer(request, body, reply, drop_after=drop, chunk_delay=self.chunk_delay)


async def answer(
    request: web.Request,
    body: dict[str, Any],
    reply: dict[str, Any],
    *,
    drop_after: int | None = None,
    chunk_delay: float = 0.0,
) -> web.StreamResponse:
    """`reply` (a chat.completion) as JSON, or as SSE chunks when the request streams; with
    `drop_after` the connection closes after that many chunks, mid-reply."""
    if not body.get("stream"):
        return web.json_response(reply)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for n, chunk in enumerate(stream_chunks(reply, include_usage)):
        if drop_after is not None and n >= drop_after:
            assert request.transport is not None
            request.transport.close()  # no final chunk, no [DONE]: a dropped connection
            return response
        if chunk_delay:
            await asyncio.sleep(chunk_delay)
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def text_pieces(text: str) -> list[str]:
    """How the fake server splits a reply's text into streamed pieces: a word (with the
    space before it) per chunk."""
    pieces: list[str] = []
    for word in text.split(" "):
        if pieces:
            word = " " + word
        if word:
            pieces.append(word)
    return pieces


def stream_chunks(reply: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The chat.completion.chunk objects a server streams for `reply`."""
    choice = reply["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": reply.get("id", "chatcmpl-1"),
            "object": "chat.completion.chunk",
            "created": reply.get("created", 1700000000),
            "model": reply.get("model", "gpt-fake"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in text_pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or ()):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        function = {"name": call["function"]["name"], "arguments": arguments[:half]}
        first: dict[str, Any] = {"index": index, "type": "function", "function": function}
        if "id" in call:
            first["id"] = call["id"]
        chunks.append(chunk({"tool_calls": [first]}))
        rest = {"index": index, "function": {"arguments": arguments[half:]}}
        chunks.append(chunk({"tool_calls": [rest]}))
    chunks.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage and reply.get("usage"):
        usage = chunk({})
        usage["choices"] = []
        usage["usage"] = reply["usage"]
        chunks.append(usage)
    return chunks


def completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
    }


def with_usage(
    reply: dict[str, Any], prompt: int, completion: int, cached: int = 0
) -> dict[str, Any]:
    """`reply` reporting this usage, as OpenAI and llama.cpp's server do (cached prompt
    tokens in `prompt_tokens_details`); streamed, it rides in the last chunk."""
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return {**reply, "usage": usage}


def tool_call_reply(arguments: str, *more: str, ids: tuple[str | None, ...] = ()) -> dict[str, Any]:
    """A reply calling read_file once per `arguments`; `ids` (None: no id sent) default to
    call_2, call_3, ..."""
    calls = []
    for n, args in enumerate((arguments, *more)):
        call: dict[str, Any] = {
            "type": "function",
            "function": {"name": "read_file", "arguments": args},
        }
        call_id = ids[n] if n < len(ids) else f"call_{n + 2}"
        if call_id is not None:
            call["id"] = call_id
        calls.append(call)
    return completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")


def says(text: str) -> dict[str, Any]:
    """A reply that answers with `text`."""
    return completion({"role": "assistant", "content": text}, "stop")


def calls(*called: dict[str, Any]) -> dict[str, Any]:
    """A native tool-call reply: each as {"name": ..., "arguments": {...}}."""
    native = [
        {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for n, c in enumerate(called)
    ]
    return completion({"role": "assistant", "content": None, "tool_calls": native}, "tool_calls")


@pytest.fixture(name="server")
async def fake_openai_server() -> AsyncIterator[FakeOpenAI]:
    """A running FakeOpenAI; a test module imports this to have the `server` fixture."""
    fake = FakeOpenAI(reply=completion({"role": "assistant", "content": "hello"}, "stop"))
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    app.router.add_get("/props", fake.get_props)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    fake.url = f"http://127.0.0.1:{port}/v1"
    yield fake
    await runner.cleanup()


@pytest.fixture(name="provider")
async def fake_openai_provider(server: FakeOpenAI) -> AsyncIterator[OpenAICompatibleProvider]:
    """Our OpenAI-compatible provider pointed at the `server` fixture (import both)."""
    p = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="small", timeout=5)
    yield p
    await p.aclose()
