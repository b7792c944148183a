"""Agents written for other SDKs, as their users write them, and the model they talk to.

The workload of bench/compare_loops.py: N model calls, each asking for one tool whose
result is R bytes of distinct seeded text; the N-th answers. The model is a Chat
Completions server on localhost (the remote LLM, faked at its HTTP interface) that decides
from the request alone (how many tool results it carries), so a retried or replayed call
gets the same answer.

The agents themselves: tests/support/peer_openai_agent.py, tests/support/peer_pydantic_agent.py;
the names they share with this server: tests/support/peer_workload.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from tests.support.fake_openai import answer, completion, says


@dataclass
class ToolLoopModel:
    """Asks for `read_result` until the request carries `calls - 1` results, then answers."""

    calls: int
    result_bytes: int
    url: str = ""
    requests: int = 0
    request_bytes: list[int] = field(default_factory=list)
    answered: asyncio.Event = field(default_factory=asyncio.Event)  # set at every request
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() of each request
    carried: list[int] = field(default_factory=list)  # tool results each request carried

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        self.requests += 1
        self.arrivals.append(time.monotonic())
        self.request_bytes.append(len(raw))
        self.answered.set()
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        self.carried.append(done)
        if done + 1 >= self.calls:
            return await answer(request, body, says(f"read {done} results"))
        arguments = json.dumps({"index": done, "size": self.result_bytes})
        call = {
            "id": f"call_{done}",
            "type": "function",
            "function": {"name": "read_result", "arguments": arguments},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return await answer(request, body, completion(message, "tool_calls"))


@asynccontextmanager
async def serving(model: ToolLoopModel) -> AsyncIterator[ToolLoopModel]:
    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/chat/completions", model.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    model.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        yield model
    finally:
        await runner.cleanup()
