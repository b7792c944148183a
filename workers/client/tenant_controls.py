"""What an operator (agentctl quota/tenant) or an admin key (the gateway) does to a tenant:
set its quotas, freeze it, thaw it. Each commits first, then wakes the tenant's parked tasks
(the `tenant_changed` signal) so they check again at once; a wake that fails to arrive is
made up by the loop's own re-check (workflows/parks.py)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.policies.task_rules import check_decider
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifacts import check_user_tenant
from durable_agents.storage.quotas import Quotas
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import TenantChangedInput
from durable_agents.workflows.policies import workflow_id_for

log = logging.getLogger(__name__)

# Signals in flight at once while waking a tenant's parked tasks.
WAKE_CONCURRENCY = 16


@dataclass(frozen=True)
class TenantState:
    tenant_id: str
    frozen: bool
    # The table's figures (None: the default holds) and what holds with the defaults.
    quotas: Quotas
    effective: Quotas
    # Parked tasks signalled to check again.
    woken: int = 0


def _who(by: str) -> str:
    return check_decider("by", by)


async def tenant_state(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, defaults: Quotas | None
) -> TenantState:
    """The tenant's quotas (set, and in force with the defaults) and whether it is frozen."""
    tenant_id = check_user_tenant(tenant_id)
    async with agent_state(sessions, tenant_id) as st:
        quotas, frozen = await st.controls.quotas(), await st.controls.frozen()
    return TenantState(tenant_id, frozen, quotas, quotas.over(defaults))


async def set_quotas(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    changes: dict[str, Any],
    by: str,
    defaults: Quotas | None = None,
) -> TenantState:
    """Set (a number) or clear (None) the named quotas; tasks parked at a quota check
    again (one the new figures allow goes on)."""
    tenant_id, by = check_user_tenant(tenant_id), _who(by)
    if not changes:
        raise ValueError("quota: name at least one figure to set or clear")
    async with agent_state(sessions, tenant_id, write=True) as st:
        await st.controls.set_quotas(changes, by)
    woken = await _wake(client, sessions, tenant_id, (SessionStatus.QUOTA_EXHAUSTED,))
    state = await tenant_state(sessions, tenant_id, defaults)
    return TenantState(state.tenant_id, state.frozen, state.quotas, state.effective, woken)


async def freeze(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, by: str
) -> TenantState:
    """Freeze the tenant: every running task parks as `frozen` at its next model step,
    no task starts, its devices get no calls. Committed work stays as it is. A tenant
    nothing names (TenantControls.check_known) is refused: TenantNotFound."""
    tenant_id, by = check_user_tenant(tenant_id), _who(by)
    async with agent_state(sessions, tenant_id, write=True) as st:
        await st.controls.check_known()
        await st.controls.set_frozen(True, by)
    return await tenant_state(sessions, tenant_id, None)


async def thaw(
    client: Client, sessions: async_sessionmaker[AsyncSession], tenant_id: str, by: str
) -> TenantState:
    """Thaw the tenant: its frozen tasks go on from the step they stopped before
    (TenantNotFound for a tenant nothing names, as `freeze`)."""
    tenant_id, by = check_user_tenant(tenant_id), _who(by)
    async with agent_state(sessions, tenant_id, write=True) as st:
        await st.controls.check_known()
        await st.controls.set_frozen(False, by)
    # Quota-parked tasks may have been re-parked as frozen meanwhile: both check again.
    statuses = (SessionStatus.FROZEN, SessionStatus.QUOTA_EXHAUSTED)
    woken = await _wake(client, sessions, tenant_id, statuses)
    state = await tenant_state(sessions, tenant_id, None)
    return TenantState(state.tenant_id, False, state.quotas, state.effective, woken)


async def _wake(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    statuses: tuple[str, ...],
) -> int:
    async with agent_state(sessions, tenant_id) as st:
        parked = await st.controls.parked_sessions(statuses)
    limit = asyncio.Semaphore(WAKE_CONCURRENCY)

    async def wake(session_id: uuid.UUID) -> bool:
        handle = client.get_workflow_handle(workflow_id_for(str(session_id)))
        async with limit:
            try:
                await handle.signal(AgentWorkflow.tenant_changed, TenantChangedInput(tenant_id))
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
                return False  # its run ended meanwhile
        return True

    woken = await asyncio.gather(*(wake(s) for s in parked))
    return sum(woken)
