"""A model activity during a provider outage: AgentState says `waiting_model` with the
provider's last error, the attempt and the next try, until the model answers again.

Temporal retries ModelUnavailable with no attempt limit up to the task's outage deadline
(workflows/model_calls.py). Every other retryable error becomes final after
MODEL_OTHER_ERROR_ATTEMPTS, as it did before outages were outwaited: a bug must not be
retried for hours.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from durable_agents.activities.errors import non_retryable, temporal_error
from durable_agents.activities.providers.errors import MODEL_UNAVAILABLE
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.storage.agent_state import agent_state
from durable_agents.workflows.policies import MODEL_OTHER_ERROR_ATTEMPTS

MODEL_CALL_FAILED = "ModelCallFailed"
_MAX_ERROR_CHARS = 300


@asynccontextmanager
async def outage_aware(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, session_id: uuid.UUID
) -> AsyncIterator[None]:
    """Wrap one model activity attempt (see the module docstring)."""
    info = activity.info()
    try:
        yield
    except (ProviderError, ApplicationError) as caught:
        err = temporal_error(caught) if isinstance(caught, ProviderError) else caught
        if err.type == MODEL_UNAVAILABLE and not err.non_retryable:
            await _write(sessions, tenant_id, session_id, wait_detail(err, info))
            raise err from None
        if err.non_retryable or info.attempt < MODEL_OTHER_ERROR_ATTEMPTS:
            raise err from None
        raise non_retryable(err.type or MODEL_CALL_FAILED, str(err)) from None
    except Exception as err:
        if info.attempt < MODEL_OTHER_ERROR_ATTEMPTS:
            raise
        raise non_retryable(
            MODEL_CALL_FAILED, f"{type(err).__name__} after {info.attempt} attempts"
        ) from err
    if info.attempt > 1:
        await _write(sessions, tenant_id, session_id, None)


def wait_detail(err: ApplicationError, info: activity.Info) -> dict[str, Any]:
    """What `status` shows while waiting: the redacted provider error (errors.py builds it
    without keys or prompts), this attempt, and when Temporal tries next and gives up."""
    now = datetime.now(UTC)
    delay = err.next_retry_delay or _backoff(info.retry_policy, info.attempt)
    deadline = (
        info.scheduled_time + info.schedule_to_close_timeout
        if info.schedule_to_close_timeout
        else None
    )
    next_try = now + delay if delay is not None else None
    if next_try is not None and deadline is not None and next_try >= deadline:
        next_try = None  # this was the last attempt before the deadline
    return {
        "activity": info.activity_type,
        "error": err.message[:_MAX_ERROR_CHARS],
        "attempt": info.attempt,
        "next_try_at": next_try.isoformat() if next_try else None,
        "deadline_at": deadline.isoformat() if deadline else None,
    }


def _backoff(policy: RetryPolicy | None, attempt: int) -> timedelta | None:
    """The pause Temporal takes after `attempt` under `policy` (its documented formula)."""
    if policy is None:
        return None
    delay = policy.initial_interval * policy.backoff_coefficient ** (attempt - 1)
    cap = policy.maximum_interval or policy.initial_interval * 100
    return min(delay, cap)


async def _write(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: uuid.UUID,
    detail: dict[str, Any] | None,
) -> None:
    # Showing the wait is a courtesy: a failed write must not replace the provider's error.
    try:
        async with agent_state(sessions, tenant_id, write=True) as st:
            if detail is None:
                await st.sessions.clear_waiting_model(session_id)
            else:
                await st.sessions.set_waiting_model(session_id, detail)
    except Exception:
        activity.logger.warning(
            "could not record the model wait of session %s", session_id, exc_info=True
        )
