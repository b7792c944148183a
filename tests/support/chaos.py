"""Helpers for the chaos tests: audit what a batch of runs committed, fail the activity
attempts a killed worker left behind, and collect one summary line per scenario."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources
from tests.support.helpers import items_of, s3_sha256, stored_key

SUMMARIES: list[str] = []


@dataclass
class Audit:
    """What the runs of one scenario left in AgentState and S3."""

    runs: int = 0
    completed: int = 0
    duplicates: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    error_results: list[str] = field(default_factory=list)
    refs: int = 0
    items: dict[str, list[ItemRow]] = field(default_factory=dict)


async def audit_runs(
    res: Resources, tenant: str, session_ids: list[str], statuses: list[str]
) -> Audit:
    """Duplicates (repeated idempotency keys or more than one tool_result per tool_call),
    calls with no result, and refs whose object is missing or does not hash to its name."""
    audit = Audit(runs=len(session_ids), completed=statuses.count("completed"))
    for session_id in session_ids:
        items = await items_of(res, tenant, session_id)
        audit.items[session_id] = items
        keys = Counter(i.idempotency_key for i in items)
        audit.duplicates += [f"{session_id} key {k} x{n}" for k, n in keys.items() if n > 1]
        calls = {i.tool_call_id for i in items if i.kind == "tool_call"}
        results = Counter(i.tool_call_id for i in items if i.kind == "tool_result")
        audit.duplicates += [f"{session_id} {c}: {n} results" for c, n in results.items() if n > 1]
        audit.unanswered += [f"{session_id} {c}" for c in sorted(calls - set(results))]
        for item in items:
            if item.kind == "tool_result" and "error_type" in item.data:
                audit.error_results.append(f"{session_id} {item.tool_call_id}: {item.text}")
            info = item.data.get("artifact")
            if not info:
                continue
            audit.refs += 1
            try:
                actual = await s3_sha256(res, stored_key(res, item))
            except ClientError:
                actual = "missing"
            if actual != info["sha256"]:
                audit.dangling.append(
                    f"{session_id} {item.kind} -> {stored_key(res, item)}: {actual}"
                )
    return audit


def summarise(scenario: str, audit: Audit, seconds: float, **extra: Any) -> str:
    parts = [
        f"{scenario}: runs={audit.runs}",
        f"completed={audit.completed}",
        f"duplicates={len(audit.duplicates)}",
        f"dangling_refs={len(audit.dangling)}",
        f"refs_checked={audit.refs}",
        *(f"{k}={v}" for k, v in extra.items()),
        f"wall={seconds:.1f}s",
    ]
    line = " ".join(parts)
    SUMMARIES.append(line)
    print(line)
    return line


def write_summaries(path: Path) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    path.write_text("".join(f"{stamp} {line}\n" for line in SUMMARIES))


async def results_of(handles: list[WorkflowHandle[Any, Any]], within_seconds: float) -> list[str]:
    """Each run's final status ("completed" or the failure), waiting for all of them."""

    async def one(handle: WorkflowHandle[Any, Any]) -> str:
        try:
            return str((await handle.result()).status)
        except Exception as err:  # the status line is the point
            return f"failed: {err}"

    async with asyncio.timeout(within_seconds):
        return list(await asyncio.gather(*(one(h) for h in handles)))


async def fail_attempts_of_dead_worker(
    client: Client, handles: list[WorkflowHandle[Any, Any]], pid: int
) -> int:
    """Fail, by id, every activity attempt still marked started by the killed worker `pid`.

    Temporal cannot tell that a worker died; an attempt without a heartbeat timeout (the
    model call: 5 min start-to-close, state writes: 30 s) is only retried when its timeout
    expires. This does what a heartbeat timeout would: the attempt fails now and is retried
    under its normal retry policy. Returns how many attempts were failed.
    """
    failed = 0
    for handle in handles:
        desc = await handle.describe()
        for pending in desc.raw_description.pending_activities:
            if pending.state != PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                continue
            if not pending.last_worker_identity.startswith(f"{pid}@"):
                continue
            attempt = client.get_async_activity_handle(
                workflow_id=handle.id, run_id=desc.run_id, activity_id=pending.activity_id
            )
            try:
                await attempt.fail(RuntimeError(f"worker {pid} was SIGKILLed"))
                failed += 1
            except RPCError:
                pass  # it finished (or timed out) in the meantime
    return failed


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
