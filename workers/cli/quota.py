"""agentctl quota: a tenant's quotas (tokens and cost per UTC day and month, running and
parked tasks, starts per minute). A figure set here replaces AGENT_TENANT_QUOTAS' default
for the tenant; `--clear NAME` gives the default back; neither: unlimited."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from durable_agents.storage.quotas import QUOTA_NAMES, Quotas
from durable_agents.workers.cli.common import (
    Tenant,
    as_operator,
    console,
    run_async,
    tenant_or_default,
    with_resources,
    with_service,
)
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.tenant_controls import TenantState, tenant_state
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings

quota_app = typer.Typer(no_args_is_help=True, help=__doc__)

_INTEGER = {n for n in QUOTA_NAMES if not n.startswith("cost_")}


def quota_changes(pairs: list[str], clear: list[str]) -> dict[str, Any]:
    """NAME=VALUE pairs and names to clear, as figures (None: cleared)."""
    changes: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in QUOTA_NAMES:
            raise ValueError(f"quota wants NAME=VALUE with NAME one of {', '.join(QUOTA_NAMES)}")
        try:
            changes[name] = int(value) if name in _INTEGER else float(value)
        except ValueError:
            raise ValueError(f"quota {name}: not a number") from None
    for name in clear:
        if name not in QUOTA_NAMES:
            raise ValueError(f"--clear {name}: not a quota (one of {', '.join(QUOTA_NAMES)})")
        changes[name] = None
    return changes


def _defaults(tenant: str) -> Quotas | None:
    quotas = get_settings().agent.tenant_quotas
    return quotas.get(tenant) or quotas.get("*")


def describe(state: TenantState) -> str:
    """One line per quota: what holds, and whether the tenant's own figure set it."""
    lines = [f"tenant {state.tenant_id}: {'FROZEN' if state.frozen else 'not frozen'}"]
    for name in QUOTA_NAMES:
        value, own = getattr(state.effective, name), getattr(state.quotas, name)
        source = "set" if own is not None else "default" if value is not None else ""
        lines.append(f"{name}={'unlimited' if value is None else f'{value:g}'} {source}".rstrip())
    if state.woken:
        lines.append(f"woke {state.woken} parked task(s)")
    return "\n".join(lines)


@quota_app.command("set")
def set_cmd(
    figures: Annotated[
        list[str] | None, typer.Argument(help="NAME=VALUE, e.g. tokens_per_day=2000000.")
    ] = None,
    clear: Annotated[
        list[str] | None, typer.Option("--clear", metavar="NAME", help="NAME: back to the default.")
    ] = None,
    tenant: Tenant = None,
    by: Annotated[str | None, typer.Option(help="Who decides (recorded).")] = None,
) -> None:
    """Set or clear a tenant's quotas; tasks parked at a quota check again."""
    changes, caller = quota_changes(figures or [], clear or []), as_operator(tenant, by)

    async def go(service: TaskService) -> TenantState:
        return await service.set_quotas(caller, changes)

    console.print(describe(run_async(with_service(go))), markup=False, highlight=False)


@quota_app.command("show")
def show_cmd(tenant: Tenant = None) -> None:
    """The quotas in force for a tenant (its own figures, else the defaults)."""
    t = tenant_or_default(tenant)

    async def go(res: Resources) -> TenantState:
        return await tenant_state(res.sessions, t, _defaults(t))

    console.print(describe(run_async(with_resources(go))), markup=False, highlight=False)
