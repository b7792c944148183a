"""AgentState as one facade: one tenant's rows in one unit of work.

    async with agent_state(sessions, tenant) as st:            # reads
        row = await st.sessions.get(session_id)
    async with agent_state(sessions, tenant, write=True) as st:  # one transaction
        await st.items.append(new_item)
    async with agent_state(sessions, tenant, autocommit=True) as st:  # each statement
        ...

The tenant and the database session are bound once, so every repository and read model in a
block reads and writes the same tenant in the same transaction; `write=True` commits at the
end of the block (and rolls back if it raises); `autocommit=True` commits each statement by
itself (storage.db.autocommit: reads, and single writes that need no partner).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cached_property

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.admissions import AdmissionRepository
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.call_reads import CallReads
from durable_agents.storage.compactions import CompactionRepository
from durable_agents.storage.context_configs import ContextConfigRepository
from durable_agents.storage.db import autocommit as autocommitting
from durable_agents.storage.decision_requests import DecisionRequests
from durable_agents.storage.device_calls import DeviceCallRepository
from durable_agents.storage.devices import DeviceRepository
from durable_agents.storage.external_items import ExternalItems
from durable_agents.storage.items import ItemRepository
from durable_agents.storage.memories import MemoryRepository
from durable_agents.storage.quotas import TenantControls
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.tool_effects import ToolEffectRepository
from durable_agents.storage.turns import TurnRepository
from durable_agents.storage.usage import UsageRepository


@dataclass
class AgentState:
    """One tenant's AgentState in one database session (see the module docstring)."""

    db: AsyncSession
    tenant_id: str

    @cached_property
    def sessions(self) -> SessionRepository:
        return SessionRepository(self.db, self.tenant_id)

    @cached_property
    def items(self) -> ItemRepository:
        return ItemRepository(self.db, self.tenant_id)

    @cached_property
    def turns(self) -> TurnRepository:
        return TurnRepository(self.db, self.tenant_id)

    @cached_property
    def artifacts(self) -> ArtifactRepository:
        return ArtifactRepository(self.db, self.tenant_id)

    @cached_property
    def compactions(self) -> CompactionRepository:
        return CompactionRepository(self.db, self.tenant_id, self.items.lineage)

    @cached_property
    def configs(self) -> ContextConfigRepository:
        return ContextConfigRepository(self.db, self.tenant_id)

    @cached_property
    def memories(self) -> MemoryRepository:
        return MemoryRepository(self.db, self.tenant_id)

    @cached_property
    def effects(self) -> ToolEffectRepository:
        return ToolEffectRepository(self.db, self.tenant_id)

    @cached_property
    def usage(self) -> UsageRepository:
        return UsageRepository(self.db, self.tenant_id)

    @cached_property
    def devices(self) -> DeviceRepository:
        return DeviceRepository(self.db, self.tenant_id)

    def device_calls(self, device_id: str) -> DeviceCallRepository:
        """The calls of one of this tenant's devices (ValueError for a malformed id)."""
        return DeviceCallRepository(self.db, self.tenant_id, device_id)

    @cached_property
    def external(self) -> ExternalItems:
        """The items of sessions another SDK keeps here: the newest, and removing them."""
        return ExternalItems(self.db, self.tenant_id)

    @cached_property
    def controls(self) -> TenantControls:
        return TenantControls(self.db, self.tenant_id)

    @cached_property
    def admissions(self) -> AdmissionRepository:
        return AdmissionRepository(self.db, self.tenant_id)

    @cached_property
    def requests(self) -> DecisionRequests:
        return DecisionRequests(self.db, self.tenant_id)

    @cached_property
    def calls(self) -> CallReads:
        return CallReads(self.db, self.items)


@asynccontextmanager
async def agent_state(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    *,
    write: bool = False,
    autocommit: bool = False,
) -> AsyncIterator[AgentState]:
    """`tenant_id`'s AgentState for one block: a read session; with `write` one transaction
    committed when the block ends; with `autocommit` each statement committed by itself."""
    if write and autocommit:
        raise ValueError("agent_state: write (one transaction) or autocommit, not both")
    if autocommit:
        async with autocommitting(sessions) as db:
            yield AgentState(db, tenant_id)
        return
    async with sessions() as db:
        if write:
            async with db.begin():
                yield AgentState(db, tenant_id)
        else:
            yield AgentState(db, tenant_id)
