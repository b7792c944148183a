"""What each activity that admits something (call_model, run_tool, offer_device_call,
open_child_session) holds of the one gate: the deployment's limits, and the unit of work an
admission is decided and recorded in (activities/policies/admission.py)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.policies.admission import Admission, Gate, GateLimits, admit
from durable_agents.storage.admissions import TOOL
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.models import SessionRow
from durable_agents.storage.quotas import Quotas, tenant_default
from durable_agents.workflows.contracts import Closed, ToolRunInput


class Gatekeeper:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        quotas: Mapping[str, Quotas] | None = None,
        *,
        max_sub_agents: int | None = None,
    ) -> None:
        """`quotas`: the default quotas by tenant ("*": any other; storage/quotas.py);
        `max_sub_agents`: how many sub-agents one task may start (None: no cap)."""
        self._sessions = sessions
        self._quotas = dict(quotas or {})
        self._max_sub_agents = max_sub_agents

    def limits(self, tenant_id: str) -> GateLimits:
        return GateLimits(tenant_default(self._quotas, tenant_id), self._max_sub_agents)

    async def admit(self, tenant_id: str, request: Admission) -> Gate:
        """Decide and record `request` in a transaction of its own."""
        async with agent_state(self._sessions, tenant_id, write=True) as st:
            return await admit(st, request, self.limits(tenant_id))

    async def admit_tool(
        self, inp: ToolRunInput, session: SessionRow | None = None
    ) -> Closed | None:
        """Admit one run of a tool call (its key: a re-run in doubt is another run).
        `session`: its row as the caller read it (the admission reads only what never
        changes on it: its id and when it was created), else read here."""
        async with agent_state(self._sessions, inp.tenant_id, write=True) as st:
            if session is None:
                session = await st.sessions.get(uuid.UUID(inp.session_id))
            root = uuid.UUID(inp.budget_session_id) if inp.budget_session_id else None
            request = Admission(TOOL, inp.idempotency_key, session, inp.budget, root)
            return (await admit(st, request, self.limits(inp.tenant_id))).closed

    async def settle(self, tenant_id: str, idempotency_key: str) -> None:
        """End a model call's reservation when the call failed (a counted reply ends its
        own, in the reply's transaction)."""
        async with agent_state(self._sessions, tenant_id, autocommit=True) as st:
            await st.admissions.settle(idempotency_key)
