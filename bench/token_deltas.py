"""Token deltas: NOTIFYs per model call and the time streaming adds to a model step.

The real call_model activity (run with Temporal's ActivityEnvironment) on a throwaway
PostgreSQL + S3, against a fake Chat Completions server on loopback that answers a reply of
`--words` words, whole or as one SSE chunk per word. Three ways, each `--calls` steps (each a
new session, so every step really calls the model):

- whole:    MODEL_STREAM=false, no sink, the reply in one JSON body;
- streamed: the provider streams and call_model publishes coalesced deltas (the default);
- paced:    streamed, the server pausing `--pace-ms` between chunks (a model writing about
            1000/pace tokens per second), to count NOTIFYs at a realistic rate;

and the provider alone, whole and streamed to a sink that ignores the text (`sdk whole`,
`sdk stream`), to tell the SDK's cost of reading chunks from the cost of publishing.

A LISTEN connection counts the notifications on `agent_deltas` and checks the text of each
streamed step adds up to the reply. Reported: median and p90 step time, NOTIFYs per call.

    cd bench && ../.venv/bin/python token_deltas.py --calls 40 --words 300 --pace-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

import asyncpg
from aiohttp import web
from temporalio.testing import ActivityEnvironment
from throwaway_stack import bench_resources

# The tests' fake Chat Completions server (tests/support/fake_openai.py), not a copy of it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.model_call import ModelActivities
from durable_agents.activities.providers.base import ChatMessage, ModelRequest
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import NewItem
from durable_agents.storage.session_deltas import DELTA_CHANNEL, Delta, parse_delta
from durable_agents.storage.session_events import listen_dsn
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ModelCallInput
from tests.support.fake_openai import FakeOpenAI, says

TENANT = "bench"
STREAMED = ("streamed", "paced")


async def _fake_server(words: int) -> tuple[FakeOpenAI, web.AppRunner]:
    text = " ".join(f"word{n}" for n in range(words))
    fake = FakeOpenAI(reply=says(text))
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    return fake, runner


async def _new_session(res: Resources) -> str:
    sid = uuid.uuid4()
    async with agent_state(res.sessions, TENANT, write=True) as st:
        await st.sessions.create(sid, title="bench", model_config={})
        await st.items.append(
            NewItem(sid, ItemKind.USER_MESSAGE, "user", f"{sid}:task", text="Say many words.")
        )
    return str(sid)


async def _steps(
    res: Resources, fake: FakeOpenAI, calls: int, *, stream: bool, pace: float
) -> tuple[list[float], list[str]]:
    provider = OpenAICompatibleProvider(fake.url, None, "gpt-fake", timeout=60)
    acts = ModelActivities(
        res.sessions,
        res.store,
        provider,
        default_registry(),
        model="gpt-fake",
        system_prompt="You are a bench.",
        budget=ContextBudget(),
        deltas=res.deltas if stream else None,
    )
    fake.chunk_delay = pace
    env = ActivityEnvironment()
    times, sessions = [], []
    try:
        for _ in range(calls):
            sid = await _new_session(res)
            inp = ModelCallInput(sid, TENANT, 0, f"{sid}:0:model")
            started = time.perf_counter()
            await env.run(acts.call_model, inp)
            times.append(time.perf_counter() - started)
            sessions.append(sid)
    finally:
        await provider.aclose()
    return times, sessions


async def _provider_only(fake: FakeOpenAI, calls: int, *, stream: bool) -> list[float]:
    """The provider alone (no context assembly, no commit, no publishing): what streaming
    itself costs, the SDK reading chunks instead of one body."""

    async def ignore(_piece: str) -> None:
        return None

    provider = OpenAICompatibleProvider(fake.url, None, "gpt-fake", timeout=60)
    fake.chunk_delay = 0
    request = ModelRequest(
        model="gpt-fake",
        messages=[ChatMessage(role="user", content="Say many words.")],
        tools=[],
        idempotency_key="bench",
        on_text=ignore if stream else None,
    )
    times = []
    try:
        for _ in range(calls):
            started = time.perf_counter()
            await provider.complete(request)
            times.append(time.perf_counter() - started)
    finally:
        await provider.aclose()
    return times


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    async with bench_resources() as res:
        url = res.engine.url.render_as_string(hide_password=False)
        listener = await asyncpg.connect(listen_dsn(url))
        heard: dict[str, list[Delta]] = {}

        def hear(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            delta = parse_delta(payload)
            if delta is not None:
                heard.setdefault(delta.session_id, []).append(delta)

        await listener.add_listener(DELTA_CHANNEL, hear)
        fake, runner = await _fake_server(args.words)
        try:
            await _steps(res, fake, 3, stream=True, pace=0)  # warm up pools and caches
            rows = []
            for name, stream, pace in (
                ("whole", False, 0.0),
                ("streamed", True, 0.0),
                ("paced", True, args.pace_ms / 1000),
            ):
                times, sessions = await _steps(res, fake, args.calls, stream=stream, pace=pace)
                await asyncio.sleep(0.5)  # the last notifications reach the listener
                notifies = [len(heard.get(s, [])) for s in sessions]
                expected = fake.reply["choices"][0]["message"]["content"]
                whole = [
                    "".join(d.text for d in sorted(heard[s], key=lambda d: d.seq)) == expected
                    for s in sessions
                    if s in heard
                ]
                rows.append((name, times, notifies, all(whole) and len(whole) == len(sessions)))
            for name, stream in (("sdk whole", False), ("sdk stream", True)):
                times = await _provider_only(fake, args.calls, stream=stream)
                rows.append((name, times, [0] * len(times), True))
        finally:
            await runner.cleanup()
            await listener.close()
    print(f"{args.calls} model steps per way, reply of {args.words} words (one chunk each)")
    print(f"{'way':<12}{'median ms':>11}{'p90 ms':>9}{'NOTIFYs/call':>14}  text complete")
    for name, times, notifies, complete in rows:
        print(
            f"{name:<12}{statistics.median(times) * 1000:>11.1f}{_ms(times, 0.9):>9.1f}"
            f"{statistics.mean(notifies):>14.1f}  {complete if name in STREAMED else '-'}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--pace-ms", type=float, default=5.0)
    asyncio.run(main(parser.parse_args()))
