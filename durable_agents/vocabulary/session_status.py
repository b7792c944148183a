"""Where a session is in its life. The database stores the values (the check constraint
ck_sessions_status holds the same strings); no I/O here, so workflow code may import it
inside the sandbox."""

from __future__ import annotations

from enum import StrEnum


class SessionStatus(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    WAITING_DEVICE = "waiting_device"
    WAITING_MODEL = "waiting_model"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # Its rows moved to a snapshot in the cold tier; reading it rehydrates the status it had.
    ARCHIVED = "archived"
    # Ended without an answer: the model's replies stayed empty (see workflows/agent.py).
    NO_ANSWER = "no_answer"
    # Parked at its budget (tokens, cost, tool calls or time): nothing runs until someone
    # with the approve scope raises it, then the loop takes the step it stopped before.
    BUDGET_EXHAUSTED = "budget_exhausted"
    # Parked at its tenant's token or cost quota (per day or month, storage/quotas.py): it
    # goes on when the quota is raised or its period rolls over (UTC).
    QUOTA_EXHAUSTED = "quota_exhausted"
    # Parked because its tenant was frozen (the kill switch): it goes on at thaw.
    FROZEN = "frozen"
    # Ended without a checked answer: the task's own check (activities/checks) failed on
    # every answer the model gave, as many times as the check allows.
    CHECK_FAILED = "check_failed"
    # Ended because the loop made no progress: the same failing call, or replies that were
    # not answers, too many times in a row (workflows/progress.py).
    STUCK = "stuck"


def shown_status(status: str, checked: bool | None) -> str:
    """A status as people read it: a completion says whether the task's own check passed
    on its answer, so nobody takes a model's claim for a verified result."""
    if status == SessionStatus.COMPLETED and checked is not None:
        return "completed (checked)" if checked else "completed (unchecked)"
    return status


# The loop has ended: nothing changes the session until someone resumes it, a watcher may
# stop, and the cold tier may archive it. ARCHIVED is not here: it is where an ended
# session's rows went, and reading it gives back the status it ended with.
TERMINAL_STATUSES = (
    SessionStatus.COMPLETED,
    SessionStatus.FAILED,
    SessionStatus.CANCELLED,
    SessionStatus.NO_ANSWER,
    SessionStatus.CHECK_FAILED,
    SessionStatus.STUCK,
)
