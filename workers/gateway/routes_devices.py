"""Device routes: a device with a device key registers its tools, long-polls for its own
calls, renews its lease while a tool runs, and completes each call after uploading the
result to the call's presigned PUT. Only device keys pass (workers.gateway.auth.DeviceKey);
the tenant and the device come from the key, never from a request field.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from durable_agents.activities.tools.mcp_device import device_mcp_tools
from durable_agents.activities.tools.mcp_servers import McpListingError
from durable_agents.storage.devices import DeviceRepository
from durable_agents.storage.quotas import TenantControls, TenantFrozen
from durable_agents.workers.gateway import device_calls
from durable_agents.workers.gateway.auth import DeviceKey
from durable_agents.workers.gateway.context import GatewayDep
from durable_agents.workers.gateway.device_models import (
    TOOL_NAME_PATTERN,
    Completion,
    CompletionAnswer,
    DeviceIdentity,
    DeviceRegistration,
    OfferedCall,
    UploadRequest,
    UploadTarget,
)
from durable_agents.workers.gateway.device_wakes import DeviceWakes
from durable_agents.workers.gateway.errors import ApiError

router = APIRouter(prefix="/v1/device", tags=["device"])

MAX_WAIT_SECONDS = 30.0


def wakes_of(request: Request) -> DeviceWakes:
    wakes: DeviceWakes = request.app.state.device_wakes
    return wakes


@router.get("", response_model=DeviceIdentity)
async def me(principal: DeviceKey) -> DeviceIdentity:
    """Which device this key speaks for."""
    return DeviceIdentity(
        key_id=principal.key_id,
        tenant_id=principal.tenant_id,
        device_id=device_calls.device_of(principal),
    )


@router.post("", response_model=DeviceIdentity)
async def register(
    body: DeviceRegistration, principal: DeviceKey, gateway: GatewayDep
) -> DeviceIdentity:
    """Register (or re-register) the device's tools and the specs of its device-local MCP
    tools; the cloud offers those to the model from what is stored here."""
    device_id = device_calls.device_of(principal)
    bad = [t for t in body.tools if not re.fullmatch(TOOL_NAME_PATTERN, t)]
    if bad:
        raise ApiError(422, "invalid_request", f"invalid tool name {bad[0][:64]!r}")
    specs = body.spec_records()
    try:
        device_mcp_tools(specs)  # checked as the cloud will read them
    except McpListingError as err:
        raise ApiError(422, "invalid_request", str(err)) from None
    async with gateway.resources.sessions() as db, db.begin():
        await DeviceRepository(db, principal.tenant_id).register(
            device_id, sorted(set(body.tools)), specs
        )
    return DeviceIdentity(
        key_id=principal.key_id, tenant_id=principal.tenant_id, device_id=device_id
    )


@router.post(
    "/calls/next",
    response_model=OfferedCall,
    responses={204: {"description": "no call within the wait"}},
)
async def next_call(
    request: Request,
    principal: DeviceKey,
    gateway: GatewayDep,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_SECONDS)] = 20.0,
) -> OfferedCall | Response:
    """Long-poll: this device's next call (leased to it), or 204 after `wait` seconds; 429
    past the key's open long-polls, 401 once its key is revoked or expires meanwhile;
    403 while its tenant is frozen (a call already taken may still complete)."""
    async with gateway.resources.sessions() as db:
        if await TenantControls(db, principal.tenant_id).frozen():
            raise TenantFrozen(principal.tenant_id)
    found = await device_calls.next_call(gateway, wakes_of(request), principal, wait)
    if found is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return found


@router.post("/calls/{call_id}/heartbeat", status_code=status.HTTP_204_NO_CONTENT)
async def heartbeat(
    call_id: str,
    principal: DeviceKey,
    gateway: GatewayDep,
    lease: Annotated[int | None, Query(ge=1)] = None,
) -> None:
    """Still running: renew the lease (else the call is offered again once it runs out);
    `lease` (OfferedCall.lease): only that one, not a newer offer's (409)."""
    await device_calls.renew(gateway, principal, call_id, lease)


@router.post("/calls/{call_id}/upload", response_model=UploadTarget)
async def upload_target(
    call_id: str, body: UploadRequest, principal: DeviceKey, gateway: GatewayDep
) -> UploadTarget:
    """A presigned PUT for this call's result bound to its sha256 as well as its key."""
    return await device_calls.bound_upload(gateway, principal, call_id, body.sha256, body.lease)


@router.post("/calls/{call_id}/complete", response_model=CompletionAnswer)
async def complete(
    call_id: str, body: Completion, principal: DeviceKey, gateway: GatewayDep
) -> CompletionAnswer:
    """The call's result (uploaded to its target first) or its error, under the device's
    current lease (409 otherwise). A result whose uploaded object does not match size and
    sha256 is refused (422), nothing committed."""
    done, already = await device_calls.complete(gateway, principal, call_id, body)
    return CompletionAnswer(call_id=done, status="already_committed" if already else "committed")
