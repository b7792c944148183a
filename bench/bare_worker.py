"""Temporal's own floor for bench/parked_approvals.py --bare: the same commands as one of our
parked sessions, with trivial activities and nothing of ours around them.

A `BareApproval` run calls a model activity (returns at once), parks on an `approve` update,
then runs one tool activity (writes session i's marker file into the workspace) and a second
model activity, and completes: start, park on an update, approve, one file written, one model
call, complete, as an AgentWorkflow session of the bench does. No AgentState, no S3, no
payload codec, no sandbox (our worker runs without one by default), the same workflow cache.

    .venv/bin/python bench/bare_worker.py [--max-cached K] [--processes N]

is started by parked_approvals.py with AGENT_WORKSPACE, AGENT_TASK_QUEUE and TEMPORAL_ADDRESS,
and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from parked_worker import READY_MARKER, marker_content, marker_path  # bench/ is on sys.path
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from worker_metrics import ENV as METRICS_ENV
from worker_metrics import metrics_runtime

from durable_agents.workers.process.prefork import run_forked

CALL_ID = "call_0_0"
ACTIVITY_TIMEOUT = timedelta(seconds=120)


@dataclass(frozen=True)
class BareSession:
    index: int


@dataclass(frozen=True)
class BareReply:
    done: bool


@workflow.defn(name="BareApproval")
class BareApproval:
    def __init__(self) -> None:
        self.parked = False
        self.approved = False

    @workflow.run
    async def run(self, session: BareSession) -> str:
        await workflow.execute_activity(
            bare_model, session, start_to_close_timeout=ACTIVITY_TIMEOUT
        )
        self.parked = True
        await workflow.wait_condition(lambda: self.approved)
        await workflow.execute_activity(bare_tool, session, start_to_close_timeout=ACTIVITY_TIMEOUT)
        await workflow.execute_activity(
            bare_model, session, start_to_close_timeout=ACTIVITY_TIMEOUT
        )
        return "completed"

    @workflow.update
    async def approve(self, call_id: str) -> bool:
        self.approved = True
        return True

    @approve.validator
    def _approvable(self, call_id: str) -> None:
        if not self.parked or self.approved or call_id != CALL_ID:
            raise ValueError(f"no pending approval {call_id!r}")

    @workflow.query
    def status(self) -> str:
        if self.approved:
            return "running"
        return "waiting_approval" if self.parked else "running"


@activity.defn
async def bare_model(session: BareSession) -> BareReply:
    return BareReply(done=True)


@activity.defn
async def bare_tool(session: BareSession) -> int:
    path = Path(os.environ["AGENT_WORKSPACE"]) / marker_path(session.index)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.write_text(marker_content(session.index))


async def serve(max_cached: int, index: int = 0) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    metrics = os.environ.get(METRICS_ENV, "").split(",")[index]
    client = await Client.connect(
        os.environ["TEMPORAL_ADDRESS"],
        runtime=metrics_runtime(metrics) if metrics else None,
    )
    queue = os.environ["AGENT_TASK_QUEUE"]
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[BareApproval],
        activities=[bare_model, bare_tool],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_cached_workflows=max_cached,
    )
    async with worker:
        print(f"{READY_MARKER} on {queue}", flush=True)
        await stop.wait()
    await asyncio.sleep(0.5)  # temporalio 1.30-1.35 can abort an exit right after shutdown


def main() -> None:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description="the parked-approvals benchmark's bare worker")
    parser.add_argument("--sessions", type=int, default=0, help="(unused: as parked_worker.py)")
    parser.add_argument("--max-cached", type=int, required=True)
    parser.add_argument("--processes", type=int, default=1, help="workers to fork (1: none)")
    args = parser.parse_args()
    if args.processes == 1:
        asyncio.run(serve(args.max_cached))
        return
    run_forked(args.processes, lambda i: asyncio.run(serve(args.max_cached, i)))


if __name__ == "__main__":
    main()
