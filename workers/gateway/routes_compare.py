"""GET /v1/compare: two or more of the key's tenant's sessions side by side, step by step
(workers/client/comparison.py), as `agentctl compare --json` prints them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.comparison import MAX_SESSIONS, Comparison
from durable_agents.workers.gateway.auth import Reader
from durable_agents.workers.gateway.context import GatewayDep

router = APIRouter(prefix="/v1", tags=["read"])

# Room for more ids than a comparison takes, so too many is refused in the service's words.
MAX_QUERY_CHARS = 40 * (MAX_SESSIONS + 4)


@router.get("/compare", response_model=Comparison)
async def compare(
    principal: Reader,
    gateway: GatewayDep,
    sessions: Annotated[
        str,
        Query(
            max_length=MAX_QUERY_CHARS,
            description=f"2-{MAX_SESSIONS} session ids, comma separated; the first is the one "
            "the others are compared with.",
        ),
    ],
) -> Comparison:
    """Per step: each session's calls, the argument keys that differ from the first
    session's, result outcomes (and whether their content is the first's), tokens, cost and
    time; per session: status, check, totals, final answer (a preview) and its first
    divergence from the first. 404 for a session not the key's tenant's; 400 for fewer
    than two, more than the maximum, or one named twice."""
    ids = [part.strip() for part in sessions.split(",")]
    return await gateway.service.compare(Caller.of_key(principal), ids)
