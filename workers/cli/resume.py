"""`agentctl resume`: continue a failed or cancelled task from its last committed item."""

from __future__ import annotations

from typing import Annotated

import typer

from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    run_async,
    session_id,
    with_service,
)
from durable_agents.workers.client.service import TaskService
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
    session, caller = session_id(session), as_operator(tenant)

    async def go(service: TaskService) -> str:
        return await service.resume(caller, session, max_steps=max_steps)

    run_async(with_service(go))
    console.print(f"resumed {session}")
