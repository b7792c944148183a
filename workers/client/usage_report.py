"""The usage read every door shares (agentctl usage, GET /v1/usage): the tenant's sums
under one filter, in total and per day, agent and model."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.usage import UsageFilter, UsageSum
from durable_agents.workers.client.tasks import session_uuid

MAX_AGENT_CHARS = 128


@dataclass(frozen=True)
class UsageReport:
    total: UsageSum
    groups: list[UsageSum]


def usage_filter(
    *,
    session: str | None = None,
    agent: str | None = None,
    day: date | None = None,
    since: date | None = None,
) -> UsageFilter:
    """The filter, checked: a bad value is refused naming its field."""
    if agent is not None and not 0 < len(agent) <= MAX_AGENT_CHARS:
        raise ValueError(f"agent: 1-{MAX_AGENT_CHARS} characters")
    if day is not None and since is not None:
        raise ValueError("day and since: give one of them")
    return UsageFilter(
        session_id=session_uuid(session) if session is not None else None,
        agent=agent,
        day=day,
        since=since,
    )


async def usage_report(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, where: UsageFilter
) -> UsageReport:
    """The tenant's usage only: another tenant's session reads as one that spent nothing."""
    async with agent_state(sessions, tenant_id) as st:
        return UsageReport(total=await st.usage.total(where), groups=await st.usage.grouped(where))
