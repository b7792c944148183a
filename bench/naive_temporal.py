"""The naive Temporal agent loop most samples show, for bench/compare_loops.py.

The message list lives in workflow state; the model activity takes the whole list as input
and the tool activity returns the whole result, so both land in history every step.
Also a bare two-activity loop (tiny payloads) as the per-step latency floor.

Kept in its own module (not the script) so the workflow sandbox can re-import it cheaply.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

TIMEOUT = timedelta(seconds=60)


def seeded_text(index: int, size: int, *, repeat: bool = False, seed: str = "bench") -> str:
    """`size` bytes of ASCII (base64 of a seeded SHAKE-256 stream, 76-char lines).

    Distinct per `index` unless `repeat`, when every index gives the same text.
    """
    key = f"{seed}:{0 if repeat else index}".encode()
    raw = base64.b64encode(hashlib.shake_256(key).digest(size * 3 // 4 + 3)).decode()
    lines = [raw[i : i + 76] for i in range(0, len(raw), 76)]
    return "\n".join(lines)[:size]


@dataclass
class NaiveInput:
    calls: int
    result_bytes: int
    repeat: bool = False


@dataclass
class ModelInput:
    messages: list[dict[str, Any]]
    calls: int


@dataclass
class ToolInput:
    index: int
    result_bytes: int
    repeat: bool = False


@dataclass
class NaiveResult:
    calls: int
    messages: int
    extra: dict[str, Any] = field(default_factory=dict)


@activity.defn(name="naive_model")
async def naive_model(inp: ModelInput) -> dict[str, Any]:
    """A fake model: one tool call per turn until `calls` turns were made, then an answer."""
    turn = sum(1 for m in inp.messages if m["role"] == "assistant")
    if turn >= inp.calls:
        return {"role": "assistant", "content": "Done.", "tool_calls": []}
    call = {"id": f"call_{turn}", "name": "read", "arguments": {"index": turn}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


@activity.defn(name="naive_tool")
async def naive_tool(inp: ToolInput) -> str:
    return seeded_text(inp.index, inp.result_bytes, repeat=inp.repeat)


@workflow.defn(name="NaiveAgentWorkflow")
class NaiveAgentWorkflow:
    @workflow.run
    async def run(self, inp: NaiveInput) -> NaiveResult:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read everything."}]
        while True:
            reply = await workflow.execute_activity(
                naive_model, ModelInput(messages, inp.calls), start_to_close_timeout=TIMEOUT
            )
            messages.append(reply)
            if not reply["tool_calls"]:
                return NaiveResult(inp.calls, len(messages))
            for call in reply["tool_calls"]:
                result = await workflow.execute_activity(
                    naive_tool,
                    ToolInput(call["arguments"]["index"], inp.result_bytes, inp.repeat),
                    start_to_close_timeout=TIMEOUT,
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


@activity.defn(name="bare_model")
async def bare_model(step: int) -> int:
    return step


@activity.defn(name="bare_tool")
async def bare_tool(step: int) -> int:
    return step


@workflow.defn(name="BareLoopWorkflow")
class BareLoopWorkflow:
    """Two activities per step, ints in and out: the floor for a Temporal agent step."""

    @workflow.run
    async def run(self, calls: int) -> int:
        for step in range(calls):
            await workflow.execute_activity(bare_model, step, start_to_close_timeout=TIMEOUT)
            await workflow.execute_activity(bare_tool, step, start_to_close_timeout=TIMEOUT)
        await workflow.execute_activity(bare_model, calls, start_to_close_timeout=TIMEOUT)
        return calls
