"""A fake Messages API server on localhost: Anthropic, faked at its HTTP interface.

A request with ``"stream": true`` is answered with the same reply as the Messages API's
Server-Sent Events (message_start, content blocks and their deltas, message_delta,
message_stop), so a test works whether the provider streams or not.
"""

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
class FakeAnthropic:
    """A tiny Messages endpoint: canned reply, programmable failures, a request log."""

    requests: list[Recorded] = field(default_factory=list)
    status: int = 200
    reply: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    url: str = ""
    # Streamed requests (0-based index into `requests`) whose connection drops after this
    # many events.
    drop_after: dict[int, int] = field(default_factory=dict)

    def fail(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.reply = {"type": "error", "error": {"type": "fake_error", "message": message}}
        self.headers = headers or {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        number = len(self.requests)
        self.requests.append(Recorded(body, dict(request.headers)))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.status != 200 or not body.get("stream"):
            return web.json_response(self.reply, status=self.status, headers=self.headers)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        drop = self.drop_after.get(number)
        for n, (event, data) in enumerate(stream_events(self.reply)):
            if drop is not None and n >= drop:
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        await response.write_eof()
        return response


def stream_events(reply: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Messages API stream for `reply` (a message object): text a word per delta,
    tool input JSON in two halves."""
    start = {**reply, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**reply["usage"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            words = block["text"].split(" ")
            deltas = [
                {"type": "text_delta", "text": (" " if i else "") + w} for i, w in enumerate(words)
            ]
        else:
            opened = {**block, "input": {}}
            raw = json.dumps(block["input"])
            half = len(raw) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[:half]},
                {"type": "input_json_delta", "partial_json": raw[half:]},
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": reply["usage"]["output_tokens"]}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


@pytest.fixture(name="server")
async def fake_anthropic_server() -> AsyncIterator[FakeAnthropic]:
    """A running FakeAnthropic; a test module imports this to have the `server` fixture."""
    fake = FakeAnthropic(reply=message([{"type": "text", "text": "hello"}], "end_turn"))
    app = web.Application()
    app.router.add_post("/v1/messages", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield fake
    await runner.cleanup()


def message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 30,
            "output_tokens": 9,
            "cache_read_input_tokens": 10,
            "cache_creation_input_tokens": 2,
        },
    }


def tool_use_reply(tool_input: Any) -> dict[str, Any]:
    return message(
        [
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": tool_input},
        ],
        "tool_use",
    )
