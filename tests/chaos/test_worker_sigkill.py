"""SIGKILL the real `agentctl worker` again and again while batches of runs are in flight:
every run still completes, nothing is duplicated, every write happens once and every
committed ref resolves to an object with the right sha256."""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.storage.tool_effects import ToolEffectRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.chaos import audit_runs, fail_attempts_of_dead_worker, results_of, summarise
from tests.support.helpers import start, tenant_root
from tests.support.processes import WorkerProcess

SEED = 20261130
BATCHES = 5
RUNS_PER_BATCH = 10
KILLS_PER_BATCH = 3
PARALLEL_BATCHES = 3
# Generous: on a loaded 2-core machine three workers importing at once can take a while.
START_TIMEOUT = 90
REPORT = "out/report.md"


def _script(source: str, report: str) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": source}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": REPORT, "content": report}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": REPORT}}]},
    ]


async def _ledger(res: Resources, tenant: str, session_ids: list[str]) -> dict[str, str]:
    """The effects ledger's rows of these sessions: idempotency key -> state."""
    async with res.sessions() as db:
        repo = ToolEffectRepository(db, tenant)
        return {
            row.idempotency_key: row.state
            for s in session_ids
            for row in await repo.for_session(uuid.UUID(s))
        }


@dataclass
class _Batch:
    workspace: Path
    report: str
    session_ids: list[str]
    statuses: list[str]
    kills: int = 0
    dead_attempts_failed: int = 0


async def _run_batch(
    batch: int, client: Client, res: Resources, ep: StackEndpoints, tmp_path: Path, tenant: str
) -> _Batch:
    """RUNS_PER_BATCH runs on one queue, served by one worker process that is SIGKILLed
    KILLS_PER_BATCH times at seeded random moments and restarted each time."""
    rng = random.Random(f"{SEED}-{batch}")
    # Tenant scope: the batch's runs share one workspace, its report and its ledger.
    base = tmp_path / f"ws-{batch}"
    workspace = tenant_root(base, tenant)
    (workspace / "in").mkdir(parents=True)
    source = f"seed {SEED} batch {batch}: {rng.getrandbits(64):x}\n" * 500
    (workspace / "in/source.txt").write_text(source)
    report = f"# Batch {batch}\n\nsource sha256 {hashlib.sha256(source.encode()).hexdigest()}\n"
    worker = WorkerProcess(
        ep,
        queue=f"sigkill-{uuid.uuid4().hex[:8]}",
        workspace=base,
        script=_script("in/source.txt", report),
        log=tmp_path / f"worker-{batch}.log",
        workspace_scope="tenant",
    )
    worker.start()
    try:
        await asyncio.to_thread(worker.wait_started, START_TIMEOUT)
        started = [
            await start(
                client,
                res,
                worker.env["AGENT_TASK_QUEUE"],
                f"batch {batch} run {run}",
                tenant=tenant,
                tool_timeout_seconds=5,
                loosened_approvals={"write_file": "never"},
                loosened_by="test",
            )
            for run in range(RUNS_PER_BATCH)
        ]
        handles = [h for _, h in started]
        out = _Batch(workspace, report, [s for s, _ in started], [])
        for _ in range(KILLS_PER_BATCH):
            await asyncio.sleep(rng.uniform(0.2, 2.0))
            assert worker.proc is not None
            pid = worker.proc.pid
            worker.kill()
            out.kills += 1
            out.dead_attempts_failed += await fail_attempts_of_dead_worker(client, handles, pid)
            worker.start()
            await asyncio.to_thread(worker.wait_started, START_TIMEOUT)
        out.statuses = await results_of(handles, within_seconds=180)
        return out
    finally:
        worker.stop()


async def test_sigkilled_worker_loses_and_duplicates_nothing_across_seeded_runs(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_stack: StackEndpoints,
    tmp_path: Path,
    tenant: str,
) -> None:
    began = time.monotonic()
    slots = asyncio.Semaphore(PARALLEL_BATCHES)

    async def one(batch: int) -> _Batch:
        async with slots:
            return await _run_batch(
                batch, chaos_client, chaos_resources, chaos_stack, tmp_path, tenant
            )

    batches = await asyncio.gather(*(one(b) for b in range(BATCHES)))
    elapsed = time.monotonic() - began
    session_ids = [s for b in batches for s in b.session_ids]
    statuses = [s for b in batches for s in b.statuses]

    audit = await audit_runs(chaos_resources, tenant, session_ids, statuses)
    # Effects: one settled ledger row per run's write_file key (completed, or reconciled from
    # the workspace after a kill between the write and the commit), none extra, and the file
    # holds what was written.
    reconciled = 0
    for b in batches:
        ledger = await _ledger(chaos_resources, tenant, b.session_ids)
        keys = {
            i.idempotency_key
            for s in b.session_ids
            for i in audit.items[s]
            if i.kind == "tool_result" and i.tool_name == "write_file"
        }
        assert set(ledger) == keys, "every write_file call leaves exactly one ledger row"
        assert set(ledger.values()) <= {"completed", "reconciled"}, ledger
        reconciled += list(ledger.values()).count("reconciled")
        assert (b.workspace / REPORT).read_text() == b.report
    summarise(
        "worker_sigkill",
        audit,
        elapsed,
        kills=sum(b.kills for b in batches),
        dead_attempts_failed=sum(b.dead_attempts_failed for b in batches),
        reconciled_writes=reconciled,
    )

    assert statuses == ["completed"] * BATCHES * RUNS_PER_BATCH
    assert audit.duplicates == []
    assert audit.unanswered == []
    assert audit.dangling == []
    assert audit.error_results == []
    for session_id, items in audit.items.items():
        kinds = [i.kind for i in items]
        assert kinds.count("tool_call") == 3 and kinds.count("tool_result") == 3, session_id
    assert audit.refs >= 3 * len(session_ids)
