"""Where a step's time goes, step by step, from history event times: which part makes the
slow steps slow (the tail), against the typical step.

A step runs from one model activity's schedule time to the next. Every workflow task and
activity scheduled inside it adds its queue time (scheduled -> started) and run time
(started -> completed) to that step; what is left of the step is "other" (time between
tasks that no event covers, e.g. a local activity inside a workflow task's run)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from temporalio.api.enums.v1 import EventType

WFT = "workflow task"
_SCHEDULED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
}


def _scheduled_id(e: Any) -> int | None:
    t = e.event_type
    if t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        return int(e.activity_task_started_event_attributes.scheduled_event_id)
    if t == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
        return int(e.workflow_task_started_event_attributes.scheduled_event_id)
    if t == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return int(e.activity_task_completed_event_attributes.scheduled_event_id)
    if t == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        return int(e.workflow_task_completed_event_attributes.scheduled_event_id)
    return None


def step_components(history: Any, model_activities: set[str]) -> list[dict[str, float]]:
    """Per step (model schedule to next model schedule): ms per part, plus "step" (the total)."""
    steps: list[dict[str, float]] = []
    begun: list[float] = []
    owner: dict[int, tuple[int, str]] = {}  # scheduled event id -> (step index, part name)
    mark: dict[int, float] = {}  # scheduled event id -> time of its last event so far
    for e in history.events:
        t = e.event_time.ToNanoseconds() / 1e6
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = e.activity_task_scheduled_event_attributes.activity_type.name
            if name in model_activities:
                if begun:
                    steps[-1]["step"] = t - begun[-1]
                begun.append(t)
                steps.append(defaultdict(float))
        if not steps:
            continue
        if e.event_type in _SCHEDULED:
            name = (
                WFT
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
                else e.activity_task_scheduled_event_attributes.activity_type.name
            )
            owner[e.event_id], mark[e.event_id] = (len(steps) - 1, name), t
            continue
        sid = _scheduled_id(e)
        if sid is None or sid not in owner:
            continue
        index, name = owner[sid]
        phase = (
            "queue"
            if e.event_type
            in (
                EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
                EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
            )
            else "run"
        )
        steps[index][f"{name} {phase}"] += t - mark[sid]
        mark[sid] = t
    finished = [dict(s) for s in steps if "step" in s]
    for s in finished:
        s["other"] = s["step"] - sum(v for k, v in s.items() if k != "step")
    return finished


def tail_rows(steps: list[dict[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Mean ms per part over the typical steps (the middle half) and over the tail (steps at
    or above the 95th percentile)."""
    ordered = sorted(steps, key=lambda s: s["step"])
    n = len(ordered)
    middle = ordered[n // 4 : max(n // 4 + 1, 3 * n // 4)]
    tail = ordered[min(n - 1, int(n * 0.95)) :]
    return _mean(middle), _mean(tail)


def _mean(steps: list[dict[str, float]]) -> dict[str, float]:
    parts = sorted({k for s in steps for k in s})
    return {k: statistics.fmean(s.get(k, 0.0) for s in steps) for k in parts}


def tail_table(by_system: dict[str, list[dict[str, float]]]) -> str:
    """A markdown table: per system, typical-step and tail-step means of every part."""
    lines = [
        "| system | part | typical step ms (middle half) | tail step ms (>= p95) |",
        "|---|---|---|---|",
    ]
    for system, steps in by_system.items():
        if not steps:
            continue
        middle, tail = tail_rows(steps)
        parts = sorted(set(middle) | set(tail), key=lambda k: (k != "step", k))
        for part in parts:
            lines.append(
                f"| {system} | {part} | {middle.get(part, 0.0):.1f} | {tail.get(part, 0.0):.1f} |"
            )
    return "\n".join(lines)
