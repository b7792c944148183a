"""A fake Chat Completions server on localhost: the remote LLM, faked at its HTTP interface."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web


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

    def fail(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.reply = {"error": {"message": message, "type": "fake_error", "code": None}}
        self.headers = headers or {}

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(Recorded(await request.json(), dict(request.headers)))
        if self.delay:
            await asyncio.sleep(self.delay)
        reply = self.queued.pop(0) if self.queued else self.reply
        return web.json_response(reply, status=self.status, headers=self.headers)


def completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
    }


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
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    fake.url = f"http://127.0.0.1:{port}/v1"
    yield fake
    await runner.cleanup()
