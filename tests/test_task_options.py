"""TaskOptions refuses what would fail a task at once or make it wait forever, for every
caller (CLI, HTTP API, a trusted backend), before anything is committed."""

from __future__ import annotations

import math
from typing import Any

import pytest

from durable_agents.activities.policies.task_rules import MAX_PENDING_DEVICE_CALLS, MAX_STEPS
from durable_agents.workers.task_options import TaskOptions


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_steps", 0),
        ("max_steps", -1),
        ("max_steps", MAX_STEPS + 1),
        ("continue_as_new_every", -1),
        ("approval_timeout_seconds", 0),
        ("approval_timeout_seconds", math.nan),
        ("approval_timeout_seconds", math.inf),
        ("tool_timeout_seconds", -5),
        ("tool_timeout_seconds", 10**9),
        ("device_schedule_to_start_seconds", 0),
        ("max_pending_device_calls", 0),
        ("max_pending_device_calls", MAX_PENDING_DEVICE_CALLS + 1),
    ],
)
def test_an_out_of_range_option_is_refused_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        TaskOptions(**{field: value})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"device_id": "a b"}, "device_id must be"),
        ({"device_tools": ["read_file"]}, "device_id"),
        ({"task_queue": ""}, "task_queue"),
        ({"approval_policies": {"write_file": "sometimes"}}, "unknown approval policy"),
    ],
)
def test_inconsistent_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TaskOptions(**options)


def test_the_defaults_and_the_bounds_themselves_are_accepted() -> None:
    TaskOptions()
    TaskOptions(max_steps=1, continue_as_new_every=0, approval_timeout_seconds=1)
    TaskOptions(max_steps=MAX_STEPS, device_id="laptop", device_tools=["read_file"])
    TaskOptions(max_pending_device_calls=1)
    TaskOptions(max_pending_device_calls=MAX_PENDING_DEVICE_CALLS)
