"""What a person is told while a task waits on its model provider or an away device: one
place for `status`, `show` and `watch`.

The workflow cannot see its activity's retries, so its status query says `running`
through an outage; the model activity records `waiting_model` and the detail in
AgentState (activities/model_wait.py), and this combines the two. Nor does it see a device
go away once its call was offered (it says `waiting_device` only for a device away when the
call started): its query names the devices of its pending calls, and the device's presence
now (workers/client/tasks.py, devices_away) says whether the task waits for one.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from durable_agents.storage.models import SessionRow
from durable_agents.vocabulary.session_status import SessionStatus

WAITING_MODEL = SessionStatus.WAITING_MODEL


def effective_status(workflow_status: str, session: SessionRow, away: Collection[str] = ()) -> str:
    """The workflow's status, or waiting_model while AgentState says the model is awaited,
    or waiting_device while a device with a pending call (`away`) is not online."""
    if workflow_status == SessionStatus.RUNNING and session.status == WAITING_MODEL:
        return WAITING_MODEL
    if workflow_status == SessionStatus.RUNNING and away:
        return SessionStatus.WAITING_DEVICE
    return workflow_status


def wait_line(session: SessionRow) -> str | None:
    """`waiting_model: attempt 9 failed (...); next try ...`, or None when not waiting."""
    detail = session.wait_detail
    if session.status != WAITING_MODEL or not detail:
        return None
    what = "compaction" if detail.get("activity") == "compact_session" else "model call"
    line = f"{WAITING_MODEL}: {what} attempt {detail.get('attempt', '?')} failed"
    line += f" ({detail.get('error', 'no error recorded')})"
    next_try = _when(detail.get("next_try_at"))
    line += f"; next try {next_try}" if next_try else "; no try left before the deadline"
    deadline = _when(detail.get("deadline_at"))
    if deadline:
        line += f"; gives up at {deadline}"
    return line


def _when(iso: object) -> str | None:
    if not isinstance(iso, str):
        return None
    try:
        return f"{datetime.fromisoformat(iso):%Y-%m-%d %H:%M:%S} UTC"
    except ValueError:
        return None
