"""agentctl tenant: the kill switch. `freeze` parks every running task of the tenant at its
next model step (status frozen), refuses its starts and its devices' calls, and keeps what
was committed; `thaw` lets them go on from where they stopped."""

from __future__ import annotations

from typing import Annotated

import typer

from durable_agents.workers.cli.common import (
    Tenant,
    console,
    operator_name,
    run_async,
    temporal_client,
    tenant_or_default,
    with_resources,
)
from durable_agents.workers.client.tenant_controls import TenantState, freeze, thaw
from durable_agents.workers.resources import Resources

tenant_app = typer.Typer(no_args_is_help=True, help=__doc__)

By = Annotated[str | None, typer.Option(help="Who decides (recorded).")]


@tenant_app.command("freeze")
def freeze_cmd(tenant: Tenant = None, by: By = None) -> None:
    """Stop every task of the tenant at its next step; refuse its starts and device calls."""
    t = tenant_or_default(tenant)

    async def go(res: Resources) -> TenantState:
        return await freeze(res.sessions, t, by or operator_name())

    run_async(with_resources(go))
    console.print(f"tenant {t}: frozen", markup=False, highlight=False)


@tenant_app.command("thaw")
def thaw_cmd(tenant: Tenant = None, by: By = None) -> None:
    """Let the tenant's frozen tasks go on from where they stopped."""
    t = tenant_or_default(tenant)

    async def go(res: Resources) -> TenantState:
        return await thaw(await temporal_client(), res.sessions, t, by or operator_name())

    state = run_async(with_resources(go))
    console.print(
        f"tenant {t}: thawed; woke {state.woken} parked task(s)", markup=False, highlight=False
    )
