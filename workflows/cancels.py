"""A cancel that lands while the loop awaits an activity. Deterministic workflow code only.

The SDK answers a cancelled activity with the activity's failure (ActivityError caused by
CancelledError) rather than the cancellation itself: the loop reads that as the cancel it is,
not as a failed model call.
"""

from __future__ import annotations

from temporalio.exceptions import ActivityError, CancelledError


def cancelled_activity(err: ActivityError) -> bool:
    """True when `err` is an activity this workflow cancelled, read as a cancel."""
    return isinstance(err.cause, CancelledError)
