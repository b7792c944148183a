"""The approvals inbox's view of waiting workflows, queried once per change of a session.

Every Temporal query is a billable action and replays the history of an evicted workflow
(docs/SCALE.md): an inbox refreshed every few seconds over many waiting sessions would
query each of them every time. A session's row changes (`updated_at`) with every item it
commits and every status it takes, so the workflow's answer is kept until the row changes,
and for at most `max_age_seconds` besides, for what a row does not show.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import datetime

from durable_agents.storage.models import SessionRow
from durable_agents.workflows.client_contracts import AgentStatus

# Sessions remembered; the least recently asked for goes first.
MAX_SESSIONS = 4096
MAX_AGE_SECONDS = 30.0


class LiveStatusCache:
    """What each waiting session's workflow last answered, by session and row version."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_age_seconds: float = MAX_AGE_SECONDS):
        self._max_sessions = max_sessions
        self.max_age_seconds = max_age_seconds
        self._known: OrderedDict[str, tuple[datetime, float, AgentStatus]] = OrderedDict()
        self.queries = 0

    async def get(
        self, row: SessionRow, query: Callable[[str], Awaitable[AgentStatus]]
    ) -> AgentStatus:
        """The workflow's status for this row: remembered while the row is unchanged and
        young enough, else asked with `query` (whose errors reach the caller)."""
        key = str(row.id)
        known = self._known.get(key)
        now = time.monotonic()
        fresh = known is not None and now - known[1] < self.max_age_seconds
        if known is not None and fresh and known[0] == row.updated_at:
            self._known.move_to_end(key)
            return known[2]
        self.queries += 1
        status = await query(key)
        self._known[key] = (row.updated_at, now, status)
        self._known.move_to_end(key)
        while len(self._known) > self._max_sessions:
            self._known.popitem(last=False)
        return status
