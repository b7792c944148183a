"""`agentctl resume`: continue a failed or cancelled task from its last committed item."""

from __future__ import annotations

from typing import Annotated

import typer

from durable_agents.workers.cli.common import (
    Tenant,
    console,
    run_async,
    session_id,
    temporal_client,
    tenant_or_default,
    with_resources,
)
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import MAX_STEPS


def resume(
    session: str,
    tenant: Tenant = None,
    max_steps: Annotated[
        int | None, typer.Option(min=1, max=MAX_STEPS, help="A new step limit for the task.")
    ] = None,
) -> None:
    """Continue a failed or cancelled task from its last committed item (same session);
    `agentctl watch` follows it."""
    session, t = session_id(session), tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        await tasks.resume(await temporal_client(), res.sessions, t, session, max_steps=max_steps)

    run_async(with_resources(go))
    console.print(f"resumed {session}")
