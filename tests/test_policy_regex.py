"""Approval-policy regexes are untrusted input: matched in linear time, and a pattern the
linear-time engine cannot take is refused when the task starts, before anything commits."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from temporalio.client import Client

from durable_agents.activities.policies.approval_policy import needs_approval
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from tests.support.helpers import committed_rows

# Generous: the evaluation takes milliseconds; this only detects a hang (a backtracking
# engine needs longer than the age of the universe for this input).
HANG_GUARD_SECONDS = 60

_EVALUATE = """
from durable_agents.activities.policies.approval_policy import needs_approval
value = "a" * 100_000 + "!"
print(needs_approval("match:content:^(a+)+$", {"content": value}))
print(needs_approval("match:content:^(a+)+!$", {"content": value}))
"""


def test_a_catastrophic_backtracking_pattern_is_matched_without_hanging() -> None:
    # A subprocess, so a hang is killed at the guard instead of pinning a core for good.
    done = subprocess.run(
        [sys.executable, "-c", _EVALUATE],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=True,
    )
    assert done.stdout.split() == ["False", "True"]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", "invalid escape sequence"),  # a backreference
        ("(?=x)", "invalid perl operator"),  # lookahead
        ("(?<!x)a", "invalid perl operator"),  # lookbehind
        ("a" * 1_000, "longer than"),  # the cap is 512 characters
    ],
)
async def test_a_pattern_re2_cannot_take_is_refused_at_start_and_nothing_is_committed(
    client: Client, resources: Resources, tenant: str, pattern: str, reason: str
) -> None:
    with pytest.raises(InvalidTaskInput, match=r"bad regex|longer than") as refused:
        # TaskOptions refuses it (the command layer's rules), before anything commits.
        options = tasks.TaskOptions(
            tenant_id=tenant,
            task_queue=f"nobody-{uuid.uuid4().hex[:8]}",
            approval_policies={"write_file": f"match:content:{pattern}"},
        )
        await tasks.start_task(client, resources.sessions, "write a report", options)
    assert reason in str(refused.value)
    assert isinstance(refused.value, ValueError)
    assert await committed_rows(resources, tenant) == {"sessions": 0, "items": 0, "artifacts": 0}


def test_a_task_started_with_a_pattern_re2_refuses_asks_a_human_instead_of_failing() -> None:
    # Policies of tasks started before the RE2 check arrive here unvalidated.
    assert needs_approval(r"match:content:(a)\1", {"content": "aa"}) is True
    assert needs_approval("match:content:^(a+)+$", {"content": "b"}) is False
