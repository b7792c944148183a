"""The worker side of bench/parked_approvals.py: the per-session script and the cloud worker
process it measures (this file, run as a script, is that process).

    .venv/bin/python bench/parked_worker.py --sessions N [--max-cached K] [--processes N]

is started by parked_approvals.py with the stack's environment (DATABASE_URL, S3_*,
TEMPORAL_ADDRESS, AGENT_WORKSPACE, AGENT_TASK_QUEUE) and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

from proc_stats import proc_pss_kib, process_tree, procs_mem_kib  # bench/ is on sys.path
from worker_metrics import ENV as METRICS_ENV
from worker_metrics import count_sql, metrics_runtime, read_counters

from durable_agents.activities.providers.base import ModelProvider, ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider, ScriptedTurn
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.workers.process.cloud import (
    build_cloud_worker,
    cloud_activities,
    running,
    worker_slots,
)
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.process.prefork import run_forked
from durable_agents.workers.resources import open_resources
from durable_agents.workers.settings import Settings
from durable_agents.workers.stack import StackEndpoints, free_port
from durable_agents.workers.temporal_client import connect_client

READY_MARKER = "parked-approvals worker ready"


def task_prefix(i: int) -> str:
    return f"parked session {i:05d}:"


_TASK_RE = re.compile(r"parked session (\d{5}):")


def task_text(i: int) -> str:
    return f"{task_prefix(i)} write the marker file, then stop."


def marker_path(i: int) -> str:
    return f"out/s{i:05d}.txt"


def marker_content(i: int) -> str:
    return f"session {i:05d} was approved\n"


class BenchModel(ScriptedProvider):
    """The sessions' fake model: it asks for session i's write_file when the task names
    session i, then says it is done. Each script is made when asked for rather than held
    for every session (10,000 held scripts were ~16 MiB of the measured worker's RSS and a
    10,000-prefix scan per call), and no request is kept (ScriptedProvider keeps them for
    test assertions)."""

    def __init__(self, sessions: int) -> None:
        super().__init__([])
        self.sessions = sessions

    def _script_for(self, request: ModelRequest) -> list[ScriptedTurn]:
        task = next((m.content for m in request.messages if m.role == "user"), "")
        match = _TASK_RE.match(task)
        if match is None or int(match.group(1)) >= self.sessions:
            return self.turns
        i = int(match.group(1))
        write = ("write_file", {"path": marker_path(i), "content": marker_content(i)})
        return [ScriptedTurn(text="Writing the marker file.", tool_calls=[write])]

    async def complete(self, request: ModelRequest) -> ModelReply:
        reply = await super().complete(request)
        self.requests.clear()
        return reply


def worker_provider(sessions: int) -> ScriptedProvider:
    return BenchModel(sessions)


async def serve_worker(provider: ModelProvider, max_cached: int | None, index: int = 0) -> None:
    """The cloud worker, configured from the environment (AGENT_*, DATABASE_URL, S3_*,
    TEMPORAL_ADDRESS), with `provider` as its model; runs until SIGTERM/SIGINT. `index`:
    which forked process this is (its metrics address is the index-th of METRICS_ENV's)."""
    settings = Settings()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_resources(settings.database, settings.s3) as res:
        metrics = os.environ.get(METRICS_ENV, "").split(",")[index]
        runtime = metrics_runtime(metrics) if metrics else None
        if runtime is not None:
            count_sql(res.engine, runtime)
        client = await connect_client(
            data_converter=data_converter_with_offload(res.store), runtime=runtime
        )
        acts = cloud_activities(settings, res, provider, default_registry())
        worker = build_cloud_worker(
            client,
            acts,
            task_queue=settings.agent.task_queue,
            max_cached_workflows=(
                settings.agent.max_cached_workflows if max_cached is None else max_cached
            ),
            sandbox=settings.agent.workflow_sandbox,
            slots=worker_slots(settings.agent),
        )
        async with running(worker):
            print(f"{READY_MARKER} on {settings.agent.task_queue}", flush=True)
            await stop.wait()


class WorkerProcess:
    def __init__(
        self,
        ep: StackEndpoints,
        *,
        queue: str,
        workspace: Path,
        sessions: int,
        max_cached: int | None,
        log: Path,
        processes: int = 1,
    ) -> None:
        """`processes` > 1: one process that forks that many workers after its imports
        (workers/process/prefork.py, as `agentctl worker --processes N`)."""
        self.argv = [sys.executable, str(Path(__file__).resolve()), "--sessions", str(sessions)]
        if max_cached is not None:
            self.argv += ["--max-cached", str(max_cached)]
        self.processes = processes
        self.argv += ["--processes", str(processes)]
        self.env = {
            **os.environ,
            **ep.env(),
            "AGENT_WORKSPACE": str(workspace),
            # One shared root, so the driver finds every session's file in one out/.
            "AGENT_WORKSPACE_SCOPE": "tenant",
            "AGENT_TASK_QUEUE": queue,
            METRICS_ENV: ",".join(f"127.0.0.1:{free_port()}" for _ in range(processes)),
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def metrics_addresses(self) -> list[str]:
        return self.env[METRICS_ENV].split(",")

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    async def wait_ready(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"worker exited early:\n{self.tail()}")
            if self.log.read_text(errors="replace").count(READY_MARKER) >= self.processes:
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"worker not ready within {within:g}s:\n{self.tail()}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class WorkerGroup:
    """N worker processes on one task queue, measured together (RSS and CPU summed)."""

    def __init__(self, workers: list[WorkerProcess]) -> None:
        self.workers = workers
        self.peak_pss_kib = 0

    @property
    def pids(self) -> list[int]:
        """The processes started (forked workers are their children)."""
        return [w.pid for w in self.workers]

    def all_pids(self) -> list[int]:
        """The processes started and the workers they forked."""
        return process_tree(self.pids)

    def start(self) -> None:
        for w in self.workers:
            w.start()

    def alive(self) -> bool:
        return all(w.alive() for w in self.workers)

    def tail(self, chars: int = 3000) -> str:
        return "\n".join(w.tail(chars // len(self.workers)) for w in self.workers)

    async def wait_ready(self, within: float = 60.0) -> None:
        await asyncio.gather(*(w.wait_ready(within) for w in self.workers))

    def mem_kib(self) -> tuple[int, int]:
        """(RSS, VmHWM) summed over every worker process: a page that forked workers share
        counts once per process here."""
        return procs_mem_kib(self.all_pids())

    def pss_kib(self) -> int:
        """PSS summed over every worker process: each shared page counted once in all.
        The highest reading so far is kept in peak_pss_kib."""
        pss = sum(proc_pss_kib(p) for p in self.all_pids())
        self.peak_pss_kib = max(self.peak_pss_kib, pss)
        return pss

    def cache_counters(self) -> dict[str, float]:
        """The SDK core's workflow-cache counters, summed over the workers."""
        return read_counters(a for w in self.workers for a in w.metrics_addresses)

    def stop(self) -> None:
        for w in self.workers:
            w.stop()


def main() -> None:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description="the parked-approvals benchmark's worker")
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument(
        "--max-cached", type=int, default=None, help="(default: AGENT_MAX_CACHED_WORKFLOWS)"
    )
    parser.add_argument("--processes", type=int, default=1, help="workers to fork (1: none)")
    args = parser.parse_args()
    if args.processes == 1:
        asyncio.run(serve_worker(worker_provider(args.sessions), args.max_cached))
        return
    run_forked(
        args.processes,
        lambda i: asyncio.run(serve_worker(worker_provider(args.sessions), args.max_cached, i)),
        encoding=Settings().model.encoding,
    )


if __name__ == "__main__":
    main()
