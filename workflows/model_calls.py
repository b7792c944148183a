"""How the loop schedules its model calls (a step, a compaction) and words their failure.
Deterministic workflow code only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, RetryState, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeout

from durable_agents.workflows.contracts import (
    AgentInput,
    ModelCallInput,
    ModelCallResult,
    PendingDeviceCall,
)
from durable_agents.workflows.policies import (
    MODEL_CALL_TIMEOUT,
    MODEL_HEARTBEAT_TIMEOUT,
    model_retry,
)
from durable_agents.workflows.tool_calls import cause_of

with workflow.unsafe.imports_passed_through():
    # Passed through: the class only names the method we schedule; its module (SQLAlchemy,
    # aioboto3) must not be re-imported in every workflow sandbox.
    from durable_agents.activities.model_call import ModelActivities


async def call_model(
    inp: AgentInput, step: int, key: str, pending: list[PendingDeviceCall]
) -> ModelCallResult:
    """One model step under `key`: the call_model activity, with the task's budget (its
    root's) and the device calls still `pending`."""
    result: ModelCallResult = await workflow.execute_activity_method(
        ModelActivities.call_model,
        ModelCallInput(
            session_id=inp.session_id,
            tenant_id=inp.tenant_id,
            step=step,
            idempotency_key=key,
            device_id=inp.settings.device_id,
            pending_device_calls=pending,
            budget=inp.settings.budget(),
            budget_session_id=inp.budget_root,
        ),
        **model_call_options(inp),
    )
    return result


def model_call_options(inp: AgentInput) -> dict[str, Any]:
    """Timeouts and retries of one model activity: retried through an outage with capped
    backoff, for at most the task's outage deadline (schedule-to-close spans every attempt)."""
    outage = timedelta(seconds=inp.settings.model_outage_seconds)
    return {
        "start_to_close_timeout": min(MODEL_CALL_TIMEOUT, outage),
        "schedule_to_close_timeout": outage,
        "heartbeat_timeout": MODEL_HEARTBEAT_TIMEOUT,
        "retry_policy": model_retry(
            timedelta(seconds=inp.settings.model_retry_max_interval_seconds)
        ),
    }


def model_failure(err: ActivityError, inp: AgentInput) -> str:
    """Why a model call failed for good, in our words plus the provider's redacted summary."""
    cause = err.cause
    # Temporal ends the retries either when the deadline passes mid-attempt (a timeout) or
    # when the next backoff would pass it (the last error, retry state TIMEOUT).
    timed_out = isinstance(cause, TemporalTimeout) and cause.type == TimeoutType.SCHEDULE_TO_CLOSE
    if timed_out or err.retry_state == RetryState.TIMEOUT:
        last = cause_of(cause) if cause is not None else "none recorded"
        return (
            "model call failed: the model stayed unavailable past the outage deadline of "
            f"{inp.settings.model_outage_seconds:g}s (AGENT_MODEL_OUTAGE_SECONDS); "
            f"last error: {last}"
        )
    return f"model call failed: {cause_of(err)}"
