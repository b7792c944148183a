"""Activity failures in our words: the one edge where an unexpected exception is translated.

Our own failures are ApplicationErrors with a type and fixed words, or exceptions of our
own packages whose messages are written that way (TransientToolError, StorageError). Any
other exception (a database driver's that quotes the statement's parameters, a library's
that quotes a page, a builtin's that quotes a value) would reach workflow history as its
message and stack; here it becomes an ApplicationError carrying only its class name, still
retryable, and the worker log gets the class and where it was raised, never the message.

A cancel is not a failure: the worker log gets one INFO line saying why, no traceback (the
SDK logs a cancel it did not ask for, e.g. its workflow already closed, as a failure with
its stack).
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory, FailureError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from durable_agents.activities.errors import retryable, temporal_error
from durable_agents.activities.providers.failure import ProviderError

log = logging.getLogger(__name__)

# Exceptions defined here carry our words (their docstrings say so); others may not.
OUR_PACKAGE = "durable_agents"


class FailureWords(Interceptor):
    """Put first in a worker's interceptors: it sees what every other one lets through."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await self.next.execute_activity(input)
        except asyncio.CancelledError:
            raise _cancelled() from None
        except FailureError:
            raise  # ours (ApplicationError) or Temporal's own: already fixed words
        except ProviderError as err:
            raise temporal_error(err) from None  # a provider's, in its own fixed words
        except Exception as err:
            if type(err).__module__.partition(".")[0] == OUR_PACKAGE:
                raise
            kind = type(err).__name__
            where = traceback.extract_tb(err.__traceback__)[-1:] if err.__traceback__ else []
            place = f"{where[0].filename}:{where[0].lineno}" if where else "?"
            log.warning("activity %s raised %s at %s", activity.info().activity_type, kind, place)
            raise retryable(kind, f"{kind} in {activity.info().activity_type}") from None


def _cancelled() -> BaseException:
    """One line for a cancel, and what to raise: the CancelledError again when the SDK
    reports it as a cancel (asked for, or the worker shutting down), else a benign error
    (logged by the SDK at DEBUG) that nobody waits for."""
    info = activity.info()
    details = activity.cancellation_details()
    why = _why(details)
    log.info("activity %s cancelled (%s), %s", info.activity_type, why, info.workflow_id)
    if details is None or details.cancel_requested or details.worker_shutdown:
        return asyncio.CancelledError()
    if details.timed_out or details.paused or details.reset:
        # The SDK words these itself (a timeout is a failure of the attempt, not a cancel).
        return asyncio.CancelledError()
    return ApplicationError(
        f"{info.activity_type} cancelled ({why})",
        type="ActivityCancelled",
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    )


def _why(details: activity.ActivityCancellationDetails | None) -> str:
    if details is None:
        return "cancelled"
    if details.not_found:
        return "its workflow closed"
    for reason in ("cancel_requested", "worker_shutdown", "timed_out", "paused", "reset"):
        if getattr(details, reason):
            return reason.replace("_", " ")
    return "cancelled"
