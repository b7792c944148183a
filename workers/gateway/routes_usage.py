"""GET /v1/usage: the key's tenant's model usage, in total and per day, agent and model."""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from durable_agents.storage.usage import UsageSum
from durable_agents.workers.client.usage_report import MAX_AGENT_CHARS, usage_filter, usage_report
from durable_agents.workers.gateway.auth import Reader
from durable_agents.workers.gateway.context import GatewayDep

router = APIRouter(prefix="/v1", tags=["read"])


class UsageFigures(BaseModel):
    replies: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    # null: some reply was unpriced (no price configured for its model), never a guess.
    cost_usd: Decimal | None
    unpriced_replies: int
    day: date | None = None
    agent: str | None = None
    provider: str | None = None
    model: str | None = None

    @classmethod
    def of(cls, s: UsageSum) -> UsageFigures:
        return cls(
            replies=s.replies,
            input_tokens=s.input_tokens,
            output_tokens=s.output_tokens,
            cached_tokens=s.cached_tokens,
            cost_usd=s.cost_usd,
            unpriced_replies=s.unpriced_replies,
            day=s.day,
            agent=s.agent,
            provider=s.provider,
            model=s.model,
        )


class Usage(BaseModel):
    total: UsageFigures
    groups: list[UsageFigures]


@router.get("/usage", response_model=Usage)
async def read_usage(
    principal: Reader,
    gateway: GatewayDep,
    session: uuid.UUID | None = None,
    agent: Annotated[str | None, Query(min_length=1, max_length=MAX_AGENT_CHARS)] = None,
    day: date | None = None,
    since: date | None = None,
) -> Usage:
    """Tokens and cost of the tenant's committed model replies (the tenant is the key's)."""
    where = usage_filter(
        session=str(session) if session else None, agent=agent, day=day, since=since
    )
    report = await usage_report(gateway.resources.sessions, principal.tenant_id, where)
    return Usage(
        total=UsageFigures.of(report.total), groups=[UsageFigures.of(g) for g in report.groups]
    )
