"""agentctl tenant: the kill switch. `freeze` parks every running task of the tenant at its
next model step (status frozen), refuses its starts and its devices' calls, and keeps what
was committed; `thaw` lets them go on from where they stopped. A tenant exists once it has
a session, an API key, a device or a quota; any other is refused, so a mistyped --tenant
freezes nothing."""

from __future__ import annotations

from typing import Annotated

import typer

from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    run_async,
    with_service,
)
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.tenant_controls import TenantState

tenant_app = typer.Typer(no_args_is_help=True, help=__doc__)

By = Annotated[str | None, typer.Option(help="Who decides (recorded).")]


@tenant_app.command("freeze")
def freeze_cmd(tenant: Tenant = None, by: By = None) -> None:
    """Stop every task of the tenant at its next step; refuse its starts and device calls.

    The tenant must exist: have a session, an API key, a device or a quota."""
    caller = as_operator(tenant, by)

    async def go(service: TaskService) -> TenantState:
        return await service.freeze(caller)

    state = run_async(with_service(go))
    console.print(f"tenant {state.tenant_id}: frozen", markup=False, highlight=False)


@tenant_app.command("thaw")
def thaw_cmd(tenant: Tenant = None, by: By = None) -> None:
    """Let the tenant's frozen tasks go on from where they stopped.

    The tenant must exist: have a session, an API key, a device or a quota."""
    caller = as_operator(tenant, by)

    async def go(service: TaskService) -> TenantState:
        return await service.thaw(caller)

    state = run_async(with_service(go))
    console.print(
        f"tenant {state.tenant_id}: thawed; woke {state.woken} parked task(s)",
        markup=False,
        highlight=False,
    )
