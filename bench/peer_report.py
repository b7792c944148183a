"""What bench/peer_plugins.py reports of one run: its row, why it ended (from the run's own
history and pending tasks), step-time growth and the worker's memory against calls."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from step_tail import step_components  # bench/ is on sys.path when run as a script
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

VARIANTS = {
    "smoke": (10, 5_000),
    "20kb": (100, 20_000),
    "100kb": (200, 100_000),
    "1mb": (100, 1_000_000),
}
_WHY_CHARS = 160


@dataclass
class Row:
    sdk: str
    ours: bool
    variant: str
    calls: int = 0  # distinct model calls answered
    requests: int = 0  # model requests, retries included
    ended: str = ""
    why: str = ""
    history_bytes: int = 0
    stored_bytes: int = 0  # our store's tenant prefix plus the harness's offload directory
    offload_bytes: int = 0
    n_r: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    first10_ms: float | None = None  # median step of the first ten
    last10_ms: float | None = None  # median step of the last ten
    rss_mib: float = 0.0  # the worker's peak (VmHWM)
    rss_by_call: list[tuple[int, float]] = field(default_factory=list)  # (calls, RSS MiB)
    model_input_mb: float = 0.0  # largest payload the SDK's converter made (before any codec)
    request_mb: float = 0.0  # largest request the model received
    seconds: float = 0.0
    log: str = ""
    # Median ms per part of a step (step_tail.step_components) over the first and last ten.
    parts_first: dict[str, float] = field(default_factory=dict)
    parts_last: dict[str, float] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        return asdict(self)


def step_ms(arrivals: list[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in itertools.pairwise(arrivals)]


def growth(steps: list[float]) -> tuple[float | None, float | None]:
    """Median of the first ten steps and of the last ten."""
    if len(steps) < 20:
        return None, None
    return statistics.median(steps[:10]), statistics.median(steps[-10:])


async def step_parts(raw: Client, workflow_id: str) -> tuple[dict[str, float], dict[str, float]]:
    """Where the first ten steps' time went and the last ten's, from the history's event times."""
    history = await raw.get_workflow_handle(workflow_id).fetch_history()
    names = {
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    steps = step_components(history, {n for n in names if "model" in n})

    def medians(part: list[dict[str, float]]) -> dict[str, float]:
        keys = sorted({k for s in part for k in s})
        return {k: round(statistics.median(s.get(k, 0.0) for s in part)) for k in keys}

    if len(steps) < 20:
        return {}, {}
    return medians(steps[:10]), medians(steps[-10:])


def probe_largest(path: Path) -> int:
    """The largest payload the worker's probe saw (bench/peer_bench_worker.py)."""
    try:
        return max((int(line.split()[1]) for line in path.read_text().splitlines()), default=0)
    except (OSError, ValueError, IndexError):
        return 0


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _WHY_CHARS else text[: _WHY_CHARS - 1] + "…"


async def why_ended(raw: Client, workflow_id: str) -> str:
    """The last failure the run's history records, and what is pending and how often tried.

    `raw` has no codec: failure messages are read as the server holds them."""
    handle = raw.get_workflow_handle(workflow_id)
    last = ""
    async for ev in handle.fetch_history_events():
        kind = ev.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            a = ev.workflow_task_failed_event_attributes
            cause = WorkflowTaskFailedCause.Name(a.cause).removeprefix(
                "WORKFLOW_TASK_FAILED_CAUSE_"
            )
            last = f"workflow task failed ({cause}): {a.failure.message}"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            last = "workflow task timed out"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            last = f"activity failed: {ev.activity_task_failed_event_attributes.failure.message}"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            f = ev.activity_task_timed_out_event_attributes.failure
            last = f"activity timed out: {f.message} {f.cause.message}".strip()
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            last = f"terminated: {ev.workflow_execution_terminated_event_attributes.reason}"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            last = f"failed: {ev.workflow_execution_failed_event_attributes.failure.message}"
    desc = (await handle.describe()).raw_description
    pending: list[str] = []
    task = desc.pending_workflow_task
    if task.attempt > 1:
        pending.append(f"workflow task at attempt {task.attempt}")
    for act in desc.pending_activities:
        if act.attempt > 1 or act.last_failure.message:
            pending.append(
                f"{act.activity_type.name} at attempt {act.attempt}: {act.last_failure.message}"
            )
    return _clip("; ".join(p for p in [last, *pending] if p))


def table(rows: list[Row]) -> str:
    head = (
        "| SDK | plugin | N x R | calls | ended | history | stored / N·R | step p50 / p95"
        " | first 10 → last 10 | worker peak RSS | model input | wall |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        calls, size = VARIANTS[r.variant]
        p = f"{r.p50_ms / 1000:.2f} / {r.p95_ms / 1000:.2f} s" if r.p50_ms and r.p95_ms else "-"
        g = (
            f"{r.first10_ms / 1000:.2f} → {r.last10_ms / 1000:.2f} s"
            if r.first10_ms and r.last10_ms
            else "-"
        )
        r_kb = f"{size // 1000} KB" if size < 1_000_000 else f"{size // 1_000_000} MB"
        lines.append(
            f"| {r.sdk} | {'ours' if r.ours else 'none'} | {calls} x {r_kb} | {r.calls} | "
            f"{r.ended} | {r.history_bytes / 1e6:.2f} MB | {r.stored_bytes / r.n_r:.2f} | {p} | "
            f"{g} | {r.rss_mib:,.0f} MiB | {r.model_input_mb:.1f} MB | {r.seconds:.0f} s |"
        )
    return "\n".join(lines)
