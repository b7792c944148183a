"""Measuring and reporting the loop comparison: history, PostgreSQL and bucket bytes, step
latency from history event times, and the tables compare_loops.py prints."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from step_tail import step_components  # bench/ is on sys.path when run as a script
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

from durable_agents.workers.resources import Resources

MODEL_ACTIVITIES = {"call_model", "naive_model", "bare_model"}


@dataclass
class Row:
    system: str
    variant: str
    calls: int
    size: int
    done: int = 0
    ended: str = ""
    history_bytes: int | None = None
    history_events: int | None = None
    runs: int | None = None
    max_run_bytes: int | None = None
    pg_bytes: int | None = None
    s3_bytes: int | None = None
    wall_s: float = 0.0
    p50_ms: float | None = None
    p95_ms: float | None = None
    # activity type (or "workflow task") -> (count, total ms scheduled->started,
    # total ms started->completed), from history event times
    breakdown: dict[str, list[float]] = field(default_factory=dict)
    pg_growth: dict[str, int] = field(default_factory=dict)
    # per step: ms per part (bench/step_tail.py), for where the tail comes from
    steps: list[dict[str, float]] = field(default_factory=list)

    @property
    def persisted(self) -> int:
        return (self.history_bytes or 0) + (self.pg_bytes or 0) + (self.s3_bytes or 0)


# -- measurements ---------------------------------------------------------------------------


async def pg_tables(res: Resources, langgraph: bool) -> dict[str, int]:
    """pg_total_relation_size (heap + TOAST + indexes) of LangGraph's checkpoint tables,
    or of ours (every other table but alembic_version)."""
    op = "LIKE" if langgraph else "NOT LIKE"
    sql = (
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
        f" AND c.relkind = 'r' AND c.relname {op} 'checkpoint%'"
        " AND c.relname <> 'alembic_version'"
    )
    async with res.sessions() as db:
        return {name: int(size) for name, size in (await db.execute(text(sql))).all()}


def grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {t: n - before.get(t, 0) for t, n in after.items() if n != before.get(t, 0)}


async def bucket_bytes(res: Resources) -> int:
    s3, total = res.store._s3, 0
    token: dict[str, Any] = {}
    while True:
        page = await s3.list_objects_v2(Bucket=res.store.bucket, **token)
        total += sum(o["Size"] for o in page.get("Contents", []))
        if not page.get("IsTruncated"):
            return total
        token = {"ContinuationToken": page["NextContinuationToken"]}


def percentiles(starts: list[float]) -> tuple[float | None, float | None]:
    steps = sorted((b - a) * 1000 for a, b in itertools.pairwise(starts))
    if not steps:
        return None, None
    return statistics.median(steps), steps[min(len(steps) - 1, int(len(steps) * 0.95))]


async def history_stats(client: Client, workflow_id: str, run_id: str, row: Row) -> None:
    """Walk the continue-as-new chain from `run_id`: bytes (server's history_size_bytes),
    events, runs, the largest run, and the step latencies from model-activity schedule times."""
    total = events = runs = biggest = 0
    model_starts: list[float] = []
    next_run: str | None = run_id
    while next_run:
        handle = client.get_workflow_handle(workflow_id, run_id=next_run)
        desc = await handle.describe()
        size = desc.raw_description.workflow_execution_info.history_size_bytes
        history = await handle.fetch_history()
        total, events, runs = total + size, events + len(history.events), runs + 1
        biggest = max(biggest, size)
        next_run = None
        add_breakdown(history, row.breakdown)
        row.steps.extend(step_components(history, MODEL_ACTIVITIES))
        for e in history.events:
            scheduled = e.activity_task_scheduled_event_attributes
            if (
                e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and scheduled.activity_type.name in MODEL_ACTIVITIES
            ):
                model_starts.append(e.event_time.ToNanoseconds() / 1e9)
            attrs = e.workflow_execution_continued_as_new_event_attributes
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                next_run = attrs.new_execution_run_id
    row.history_bytes, row.history_events, row.runs, row.max_run_bytes = (
        total,
        events,
        runs,
        biggest,
    )
    row.p50_ms, row.p95_ms = percentiles(model_starts)


def add_breakdown(history: Any, out: dict[str, list[float]]) -> None:
    """Per activity type and for workflow tasks: count, queue ms and run ms (summed)."""
    kinds: dict[int, str] = {}
    started: dict[int, float] = {}
    scheduled_at: dict[int, float] = {}
    for e in history.events:
        t = e.event_time.ToNanoseconds() / 1e6
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            kinds[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            scheduled_at[e.event_id] = t
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            kinds[e.event_id], scheduled_at[e.event_id] = "(workflow task)", t
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started[e.activity_task_started_event_attributes.scheduled_event_id] = t
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            started[e.workflow_task_started_event_attributes.scheduled_event_id] = t
        else:
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                sid = e.activity_task_completed_event_attributes.scheduled_event_id
            elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                sid = e.workflow_task_completed_event_attributes.scheduled_event_id
            else:
                continue
            if sid in started:
                acc = out.setdefault(kinds[sid], [0, 0.0, 0.0])
                acc[0] += 1
                acc[1] += started[sid] - scheduled_at[sid]
                acc[2] += t - started[sid]


def breakdown_table(rows: list[Row]) -> str:
    lines = [
        "| variant | system | activity | count | queue ms/step | run ms/step |",
        "|" + "---|" * 6,
    ]
    for r in rows:
        steps = max(1, r.done)
        for name, (count, queue, run) in sorted(r.breakdown.items()):
            lines.append(
                f"| {r.variant} | {r.system} | {name} | {int(count)} "
                f"| {queue / steps:.1f} | {run / steps:.1f} |"
            )
    return "\n".join(lines)


def completed_activities(history: Any, name: str) -> int:
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == name
    }
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and e.activity_task_completed_event_attributes.scheduled_event_id in scheduled
    )


async def stall_reason(client: Client, workflow_id: str) -> str:
    """Why a workflow stopped making progress: its last workflow-task failure, else the
    last failure of a pending activity."""
    handle = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    for e in reversed(history.events):
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            a = e.workflow_task_failed_event_attributes
            cause = WorkflowTaskFailedCause.Name(a.cause).removeprefix(
                "WORKFLOW_TASK_FAILED_CAUSE_"
            )
            return f"workflow task failed ({cause}): {a.failure.message[:160]}"
    desc = await handle.describe()
    for p in desc.raw_description.pending_activities:
        if p.last_failure.message:
            return f"activity {p.activity_type.name} failing: {p.last_failure.message[:160]}"
    return "no progress, no failure recorded"


# -- the three systems ------------------------------------------------------------------------


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(rows: list[Row]) -> str:
    head = (
        "| variant | system | calls done | ended | history MB (max run) | events / runs "
        "| PG MB | S3 MB | total / (done·R) | wall s | step p50 ms | step p95 ms |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        hist = "-"
        if r.history_bytes is not None:
            hist = f"{_mb(r.history_bytes)} ({_mb(r.max_run_bytes)})"
        ev = "-" if r.history_events is None else f"{r.history_events} / {r.runs}"
        # Ours keeps content in PostgreSQL and S3: without those measured, no ratio.
        unmeasured = r.system == "bare" or (r.system == "ours" and r.pg_bytes is None)
        ratio = "-" if unmeasured else f"{r.persisted / (max(1, r.done) * r.size):.2f}"
        lines.append(
            f"| {r.variant} | {r.system} | {r.done}/{r.calls} | {r.ended} | {hist} | {ev} "
            f"| {_mb(r.pg_bytes)} | {_mb(r.s3_bytes)} | {ratio} | {r.wall_s:.1f} "
            f"| {_ms(r.p50_ms)} | {_ms(r.p95_ms)} |"
        )
    return "\n".join(lines)
