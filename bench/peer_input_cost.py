"""What one model call's input costs the OpenAI Agents SDK's Temporal integration as the
conversation grows, service-free: the model activity's input (`ActivityModelInput`: the whole
conversation, k tool calls and their R-byte results) through the integration's own payload
converter (`OpenAIPayloadConverter`), to a payload in the workflow and back in the activity.
That is the work bench/peer_plugins.py's OpenAI Agents steps grow with; our codec sits
between the two and never sees the typed conversation.

    .venv/bin/python bench/peer_input_cost.py                  # R = 100 KB, k = 25..200
    .venv/bin/python bench/peer_input_cost.py --size 1000000 --calls 10 --calls 50
    .venv/bin/python bench/peer_input_cost.py --walk 200   # k = 1..200 in turn, RSS as it goes

`--walk` repeats what a worker does once per call (encode, decode, the chat messages the
SDK builds from the input, the request body) for k = 1, 2, ... and prints this process's RSS
(VmRSS, VmHWM): what the conversation's transient copies alone cost a worker's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from proc_stats import proc_mem_kib  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.openai_agents import OpenAIPayloadConverter
from temporalio.openai_agents._invoke_model_activity import ActivityModelInput

from tests.support.peer_workload import INSTRUCTIONS, seeded_text


def conversation(calls: int, size: int) -> list[dict[str, Any]]:
    """The input items the agent's Runner sends after `calls` tool calls (its to_input_list)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "read them all"}]
    for i in range(calls):
        call_id = f"call_{i}"
        items.append(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": "read_result",
                "arguments": json.dumps({"index": i, "size": size}),
                "id": "__fake_id__",
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": call_id, "output": seeded_text(i, size)}
        )
    return items


def model_input(calls: int, size: int) -> ActivityModelInput:
    return ActivityModelInput(
        model_name="gpt-fake",
        system_instructions=INSTRUCTIONS,
        input=conversation(calls, size),  # type: ignore[typeddict-item]
        model_settings={},  # type: ignore[typeddict-item]
        tools=[],
        handoffs=[],
        tracing=0,  # type: ignore[typeddict-item]
    )


def measure(calls: int, size: int, repeat: int) -> tuple[float, float, int]:
    """(ms to encode in the workflow, ms to decode in the activity, payload bytes), best of."""
    converter = OpenAIPayloadConverter()
    value = model_input(calls, size)
    encode = decode = float("inf")
    payload = converter.to_payloads([value])
    for _ in range(repeat):
        began = time.perf_counter()
        payload = converter.to_payloads([value])
        encode = min(encode, time.perf_counter() - began)
        began = time.perf_counter()
        converter.from_payloads(payload, [ActivityModelInput])
        decode = min(decode, time.perf_counter() - began)
    return encode * 1000, decode * 1000, len(payload[0].data)


def walk(calls: int, size: int) -> None:
    """One call's conversion work for k = 1..calls in turn, as a worker does it; RSS as it goes."""
    from agents.models.chatcmpl_converter import Converter

    converter = OpenAIPayloadConverter()
    print("| after call k | input payload | VmRSS | VmHWM |\n|---|---|---|---|")
    items: list[dict[str, Any]] = []
    for k in range(1, calls + 1):
        items = conversation(k, size)
        value = model_input(k, size)
        value["input"] = items  # type: ignore[typeddict-item]
        payload = converter.to_payloads([value])
        (decoded,) = converter.from_payloads(payload, [ActivityModelInput])
        messages = Converter.items_to_messages(decoded["input"])
        body = json.dumps({"model": "gpt-fake", "messages": messages})
        del decoded, messages
        if k % 25 == 0 or k == calls:
            rss, hwm = proc_mem_kib(os.getpid())
            print(
                f"| {k} | {len(payload[0].data) / 1e6:.1f} MB | {rss / 1024:,.0f} MiB"
                f" | {hwm / 1024:,.0f} MiB |",
                flush=True,
            )
        del payload, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--calls", type=int, action="append")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--walk", type=int, default=0)
    args = parser.parse_args(argv)
    if args.walk:
        walk(args.walk, args.size)
        return 0
    # k ascending: this process's VmHWM after each row is the largest call's peak so far.
    print("| tool results k | input payload | encode (workflow) | decode (activity) | VmHWM |")
    print("|---|---|---|---|---|")
    for calls in sorted(args.calls or [25, 50, 100, 150, 200]):
        enc, dec, size = measure(calls, args.size, args.repeat)
        hwm = proc_mem_kib(os.getpid())[1] / 1024
        print(
            f"| {calls} | {size / 1e6:.1f} MB | {enc:.0f} ms | {dec:.0f} ms | {hwm:,.0f} MiB |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
