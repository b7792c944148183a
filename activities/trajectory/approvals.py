"""The approvals-waiting gauge, kept from the activity side.

Workflow code cannot emit metrics safely (it replays), so the gauge follows the activities
that write a session's status (`set_session_status`, and `record_approval` when the decision
resumes the loop): a session entering `waiting_approval` counts +1, leaving it -1. The
previous status is read before the activity runs, so a retry of a write that already
committed sees no change and counts nothing. Writes for one session are serialised
within this process; two worker processes writing the same session at the same instant
could still both count a transition, which a gauge tolerates (it is not an audit record).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from typing import Any

import temporalio.activity
import temporalio.worker
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.trajectory.metrics import TrajectoryMetrics
from durable_agents.storage.agent_state import agent_state
from durable_agents.vocabulary.session_status import SessionStatus

logger = logging.getLogger(__name__)

# The activities whose input may carry a status to write (session_id, tenant_id, status).
STATUS_WRITERS = frozenset({"set_session_status", "record_approval"})
WAITING = SessionStatus.WAITING_APPROVAL


class ApprovalsWaitingInterceptor(temporalio.worker.Interceptor):
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], metrics: TrajectoryMetrics
    ) -> None:
        self._sessions = sessions
        self._metrics = metrics
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        return _ApprovalsInbound(next, self)

    def lock_for(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    async def status_of(self, tenant_id: str, session_id: str) -> str | None:
        try:
            async with agent_state(self._sessions, tenant_id) as st:
                row = await st.sessions.find(uuid.UUID(session_id))
                return str(row.status) if row is not None else None
        except Exception:
            logger.warning("approvals gauge: cannot read the session status", exc_info=True)
            return None

    def count(self, tenant_id: str, before: str | None, after: str) -> None:
        delta = (after == WAITING) - (before == WAITING)
        if before is not None and delta:
            try:
                self._metrics.approvals_waiting(delta, tenant_id)
            except Exception:
                logger.warning("approvals gauge: cannot record", exc_info=True)


class _ApprovalsInbound(temporalio.worker.ActivityInboundInterceptor):
    def __init__(
        self, next: temporalio.worker.ActivityInboundInterceptor, root: ApprovalsWaitingInterceptor
    ) -> None:
        super().__init__(next)
        self._root = root

    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        arg: Any = input.args[0] if input.args else None
        if temporalio.activity.info().activity_type not in STATUS_WRITERS or not all(
            isinstance(getattr(arg, a, None), str) for a in ("session_id", "tenant_id", "status")
        ):
            return await super().execute_activity(input)
        tenant_id, session_id, status = arg.tenant_id, arg.session_id, arg.status
        async with self._root.lock_for(f"{tenant_id}/{session_id}"):
            before = await self._root.status_of(tenant_id, session_id)
            result = await super().execute_activity(input)
            self._root.count(tenant_id, before, status)
            return result
