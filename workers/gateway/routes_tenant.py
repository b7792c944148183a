"""The kill switch at the gateway: a key with the admin scope freezes or thaws its own
tenant (the tenant comes from the key). Quotas are the operator's to set (agentctl quota):
a tenant's own keys read them here but never raise them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from durable_agents.storage.api_keys import Principal
from durable_agents.storage.quotas import Quotas, tenant_default
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.tenant_controls import TenantState, tenant_state
from durable_agents.workers.gateway.auth import Reader, require
from durable_agents.workers.gateway.context import Gateway, GatewayDep

router = APIRouter(prefix="/v1/tenant", tags=["tenant"])

Admin = Annotated[Principal, Depends(require("admin"))]


class TenantView(BaseModel):
    tenant_id: str
    frozen: bool
    # The quotas in force (the tenant's own figures, else the deployment's defaults).
    quotas: Quotas
    woken: int = 0


def _view(state: TenantState) -> TenantView:
    return TenantView(
        tenant_id=state.tenant_id, frozen=state.frozen, quotas=state.effective, woken=state.woken
    )


def _defaults(gateway: Gateway, tenant_id: str) -> Quotas | None:
    return tenant_default(gateway.settings.agent.tenant_quotas, tenant_id)


@router.get("", response_model=TenantView)
async def show(principal: Reader, gateway: GatewayDep) -> TenantView:
    """Whether the key's tenant is frozen, and its quotas."""
    tenant = principal.tenant_id
    return _view(await tenant_state(gateway.resources.sessions, tenant, _defaults(gateway, tenant)))


@router.post("/freeze", response_model=TenantView)
async def freeze_tenant(principal: Admin, gateway: GatewayDep) -> TenantView:
    """Stop every task of the tenant at its next step; refuse its starts and device calls."""
    return _view(await gateway.service.freeze(Caller.of_key(principal)))


@router.post("/thaw", response_model=TenantView)
async def thaw_tenant(principal: Admin, gateway: GatewayDep) -> TenantView:
    """Let the tenant's frozen tasks go on from where they stopped."""
    return _view(await gateway.service.thaw(Caller.of_key(principal)))
