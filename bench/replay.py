"""Replay: what replaying a long recorded session with replayed tools costs in wall time,
against the session it replays.

Records one session of N steps on a throwaway embedded stack (real PostgreSQL, S3 and
Temporal; a worker in this process): N-1 steps each a model reply calling a read-only tool
whose result (R bytes, distinct) is stored in S3, then an answer. The model is a script
that takes REPLY seconds per reply (a hosted model's short tool-call reply takes 1-3 s) and
the tool TOOL seconds per call. Then replays the session with the same agent through the
one service (TaskService.replay) and reports both wall times (start to result, as the
client sees them), their ratio, how many model calls and tool runs the replay made (0 and
0: every reply and result is served from the record) and its report (no divergence).

    .venv/bin/python bench/replay.py [--steps 100] [--reply-seconds 1.0] [--tool-seconds 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
import uuid
import warnings
from typing import Any

from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script

from durable_agents.activities.providers.base import ModelReply, ModelRequest, ToolSpec
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller, StartRequest
from durable_agents.workers.client.replays import ReplayRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.temporal_client import connect_client

TENANT = "bench"
TARGET = 0.10


class SlowScript:
    """The scripted model, taking `seconds` per reply."""

    name = "scripted"

    def __init__(self, steps: int, seconds: float) -> None:
        calls = [
            {"tool_calls": [{"name": "lookup", "arguments": {"query": f"item {n}"}}]}
            for n in range(steps - 1)
        ]
        self._script = ScriptedProvider.from_data([*calls, {"text": "Looked everything up."}])
        self._seconds = seconds
        self.replies = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.replies += 1
        await asyncio.sleep(self._seconds)
        return await self._script.complete(request)

    async def aclose(self) -> None:
        return None


def lookup_tool(seconds: float, size: int, runs: list[str]) -> Tool:
    """A read-only tool taking `seconds`, answering `size` distinct bytes per query."""

    async def lookup(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        runs.append(ctx.idempotency_key)
        await asyncio.sleep(seconds)
        seed = str(args.get("query", "")).encode()
        body = (hashlib.shake_256(seed).hexdigest(size // 2 + 1))[:size]
        return ToolOutput(json.dumps({"found": body}).encode(), "application/json")

    parameters = {"type": "object", "properties": {"query": {"type": "string"}}}
    spec = ToolSpec("lookup", "Look a query up.", parameters)
    return Tool(spec, lookup, effect="read_only")


async def timed(client: Any, start: Any) -> tuple[str, float]:
    """The session `start()` starts, and the wall time from its start to its result."""
    began = time.perf_counter()
    sid = await start()
    await tasks.task_handle(client, sid).result()
    return sid, time.perf_counter() - began


async def run(steps: int, reply_s: float, tool_s: float, size: int) -> None:
    async with bench_stack() as (ep, res, state):
        queue = f"replay-{uuid.uuid4().hex[:8]}"
        settings = ep.settings(workspace=state, task_queue=queue, provider="scripted")
        # Room for every step's result in the context: no compaction in either run.
        settings.model = settings.model.model_copy(update={"context_tokens": 128_000})
        client = await connect_client(ep.temporal_address, "default")
        model, runs = SlowScript(steps, reply_s), []
        registry = ToolRegistry.of([lookup_tool(tool_s, size, runs)])
        worker = build_cloud_worker(
            client, cloud_activities(settings, res, model, registry), task_queue=queue
        )
        service = TaskService(client, res.sessions, res.store, settings)
        caller = Caller.operator(TENANT)
        options = {"max_steps": steps + 1}
        async with running(worker):
            request = StartRequest("Look every item up.", "default", options)
            recorded, original = await timed(client, lambda: service.start(caller, request))
            replies, ran = model.replies, len(runs)
            print(f"recorded {steps} steps in {original:.1f}s ({model.replies} replies)")
            replay = ReplayRequest(recorded, options={"max_steps": steps + 1})
            replayed, again = await timed(client, lambda: service.replay(caller, replay))
            report = await service.replay_report(caller, replayed)
        print(f"replayed in {again:.2f}s: {again / original:.1%} of the original")
        print(
            f"  target <= {TARGET:.0%}: {'met' if again / original <= TARGET else 'NOT met'}; "
            f"model calls during the replay {model.replies - replies}, tool runs {len(runs) - ran}"
        )
        print(
            f"  report: {report.divergence or 'no divergence'}; replies {report.replies_recorded}"
            f" from the record, {report.replies_live} live; results {report.results_recorded}"
            f" replayed, {report.results_live} live, {report.results_refused} refused"
        )
        print(
            f"  session times: the record {report.recorded_seconds:.1f}s, the replay "
            f"{report.seconds:.2f}s ({report.seconds / report.recorded_seconds:.1%})"
        )


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--reply-seconds", type=float, default=1.0)
    parser.add_argument("--tool-seconds", type=float, default=0.2)
    parser.add_argument("--result-bytes", type=int, default=2048)
    return parser


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    args = arguments().parse_args()
    asyncio.run(run(args.steps, args.reply_seconds, args.tool_seconds, args.result_bytes))
