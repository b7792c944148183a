"""A scripted runaway model for governance tests (budgets, quotas, the kill switch): a tool
call every step, forever, until told to answer. Faked through the provider interface only."""

from __future__ import annotations

import asyncio

from durable_agents.activities.providers.base import ModelReply, ModelRequest, ProviderCall, Usage

PER_REPLY = (100, 10)  # input and output tokens each reply reports
# What a runaway's a.txt holds: each read asks for one byte more of it, so no read repeats
# an earlier one's result (activities/repeated_calls.py) within its 1,200 bytes.
A_TXT = "alpha " * 200
REPLY_TOKENS = sum(PER_REPLY)


class SlowRunaway:
    """Reads a.txt every step (a little more each time), `delay` seconds a reply (so tasks'
    steps interleave); once `answering` is set, every reply is a final answer. `keys`: each
    call's idempotency key."""

    name = "runaway"

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.keys: list[str] = []
        self.answering = False

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.keys.append(request.idempotency_key)
        await asyncio.sleep(self.delay)
        usage = Usage(*PER_REPLY)
        if self.answering:
            return ModelReply(text="Enough reading.", usage=usage, model="runaway")
        # Each read asks one byte more of a.txt (A_TXT): a read with the same result as one
        # just before it is no progress (activities/repeated_calls.py), and this one is a
        # runaway, not a stuck loop.
        more = {"path": "a.txt", "max_bytes": len(self.keys)}
        call = ProviderCall(id=f"c{len(self.keys)}", name="read_file", arguments=more)
        return ModelReply(text="", tool_calls=[call], finish_reason="tool_calls", usage=usage)

    def calls_of(self, session_id: str) -> list[str]:
        return [k for k in self.keys if session_id in k]

    async def aclose(self) -> None:
        return None
