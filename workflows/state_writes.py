"""The loop's writes to AgentState: each an activity with the one timeout and retry policy
state writes share (workflows/policies.py). Deterministic workflow code only."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from durable_agents.workflows.policies import STATE_WRITE_RETRY, STATE_WRITE_TIMEOUT


async def write_state(method: Any, arg: Any) -> Any:
    """Run the state-writing activity `method` with `arg`; its result."""
    return await workflow.execute_activity_method(
        method,
        arg,
        start_to_close_timeout=STATE_WRITE_TIMEOUT,
        retry_policy=STATE_WRITE_RETRY,
    )


async def write_state_in_task(method: Any, arg: Any) -> Any:
    """Like `write_state`, but as a local activity: the write happens inside the workflow
    task that asks for it (one marker event) instead of scheduling an activity and waking
    the workflow again for its result.

    Only for short idempotent writes: a worker that dies mid-write loses its workflow task,
    and the retried task runs the write again from the start. The retry policy is the one
    scheduled writes use (every retry within a minute runs in the worker, the workflow task
    heartbeating meanwhile), so a write fails the loop exactly when it did before."""
    return await workflow.execute_local_activity_method(
        method,
        arg,
        start_to_close_timeout=STATE_WRITE_TIMEOUT,
        retry_policy=STATE_WRITE_RETRY,
    )
