"""The loop's writes to AgentState: each an activity with the one timeout and retry policy
state writes share (workflows/policies.py). Deterministic workflow code only."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from workflows.policies import STATE_WRITE_RETRY, STATE_WRITE_TIMEOUT


async def write_state(method: Any, arg: Any) -> Any:
    """Run the state-writing activity `method` with `arg`; its result."""
    return await workflow.execute_activity_method(
        method,
        arg,
        start_to_close_timeout=STATE_WRITE_TIMEOUT,
        retry_policy=STATE_WRITE_RETRY,
    )
