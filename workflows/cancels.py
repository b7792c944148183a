"""A cancel that lands while the loop awaits an activity. Deterministic workflow code only.

The SDK answers a cancelled activity with the activity's failure (ActivityError caused by
CancelledError) rather than the cancellation itself, so the loop read a cancel during a model
call as "model call failed: Cancelled" and recorded `failed`. From CANCEL_IN_ACTIVITY_PATCH on
it is the cancel it is; histories recorded before replay as they ran (the patch is only asked
on that path).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

CANCEL_IN_ACTIVITY_PATCH = "cancel-in-activity"


def cancelled_activity(err: ActivityError) -> bool:
    """True when `err` is an activity this workflow cancelled, read as a cancel."""
    return isinstance(err.cause, CancelledError) and workflow.patched(CANCEL_IN_ACTIVITY_PATCH)
