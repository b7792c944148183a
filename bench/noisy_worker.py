"""The worker side of bench/noisy_neighbour.py: bench/parked_worker.py's cloud worker with a
model that answers each task by its kind. A flood task's replies each ask for FANOUT
`list_dir` calls at once, for its steps; a quiet task's replies ask for one `list_dir` call a
step; both then answer. The directories listed (d0, d1, ...: dirs_needed) are made by the
driver.

    .venv/bin/python bench/noisy_worker.py --fanout F --flood-steps S --quiet-steps Q \\
        [--max-cached K] [--processes N]

is started by noisy_neighbour.py with the stack's environment and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

from parked_worker import WorkerProcess, serve_worker  # bench/ is on sys.path

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider, ScriptedTurn
from durable_agents.workers.process.prefork import run_forked
from durable_agents.workers.settings import Settings
from durable_agents.workers.stack import StackEndpoints

FLOOD, QUIET = "flood", "quiet"


def task_text(kind: str, i: int) -> str:
    return f"{kind} task {i:05d}: list the directories, then stop."


def dirs_needed(fanout: int, flood_steps: int, quiet_steps: int) -> int:
    return max(fanout * flood_steps, quiet_steps)


class NoisyModel(ScriptedProvider):
    def __init__(self, fanout: int, flood_steps: int, quiet_steps: int) -> None:
        super().__init__([])
        # No call repeats one before it (the loop counts repeats towards `stuck`).
        self.flood = [
            ScriptedTurn(
                text="",
                tool_calls=[("list_dir", {"path": f"d{s * fanout + i}"}) for i in range(fanout)],
            )
            for s in range(flood_steps)
        ]
        self.quiet = [
            ScriptedTurn(text="", tool_calls=[("list_dir", {"path": f"d{s}"})])
            for s in range(quiet_steps)
        ]

    def _script_for(self, request: ModelRequest) -> list[ScriptedTurn]:
        task = next((m.content for m in request.messages if m.role == "user"), "")
        return self.flood if task.startswith(FLOOD) else self.quiet

    async def complete(self, request: ModelRequest) -> ModelReply:
        reply = await super().complete(request)
        self.requests.clear()  # kept for tests' assertions; nothing to keep here
        return reply


class NoisyWorkerProcess(WorkerProcess):
    """This script in place of bench/parked_worker.py."""

    def __init__(self, ep: StackEndpoints, *, shape: tuple[int, int, int], **kwargs: Any) -> None:
        super().__init__(ep, sessions=0, **kwargs)
        fanout, flood_steps, quiet_steps = shape
        self.argv = [sys.executable, str(Path(__file__).resolve())]
        self.argv += ["--fanout", str(fanout), "--flood-steps", str(flood_steps)]
        self.argv += ["--quiet-steps", str(quiet_steps), "--processes", str(self.processes)]
        if kwargs.get("max_cached") is not None:
            self.argv += ["--max-cached", str(kwargs["max_cached"])]


def main() -> None:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description="the noisy-neighbour benchmark's worker")
    parser.add_argument("--fanout", type=int, required=True)
    parser.add_argument("--flood-steps", type=int, required=True)
    parser.add_argument("--quiet-steps", type=int, required=True)
    parser.add_argument("--max-cached", type=int, default=None)
    parser.add_argument("--processes", type=int, default=1, help="workers to fork (1: none)")
    args = parser.parse_args()

    def serve(index: int) -> None:
        model = NoisyModel(args.fanout, args.flood_steps, args.quiet_steps)
        asyncio.run(serve_worker(model, args.max_cached, index))

    if args.processes == 1:
        serve(0)
        return
    run_forked(args.processes, serve, encoding=Settings().model.encoding)


if __name__ == "__main__":
    main()
