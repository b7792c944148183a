"""Device routes: a device with a device key registers its tools, long-polls for its own
calls, renews its lease while a tool runs, and completes each call after uploading the
result to the call's presigned PUT. Only device keys pass (workers.gateway.auth.DeviceKey);
the tenant and the device come from the key, never from a request field.

The routes translate HTTP to and from the dispatch (workers/device_dispatch/calls.py);
its refusals map to statuses in workers/gateway/errors.py.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status

from durable_agents.storage.api_keys import Principal
from durable_agents.workers.device_dispatch.calls import DeviceCalls
from durable_agents.workers.device_dispatch.errors import PollEnded
from durable_agents.workers.gateway.auth import DeviceKey, unauthorized
from durable_agents.workers.gateway.context import GatewayDep
from durable_agents.workers.gateway.device_models import (
    Completion,
    CompletionAnswer,
    DeviceIdentity,
    DeviceRegistration,
    OfferedCall,
    UploadRequest,
    UploadTarget,
)
from durable_agents.workers.gateway.errors import ApiError
from durable_agents.workers.gateway.key_holds import POLL

router = APIRouter(prefix="/v1/device", tags=["device"])

MAX_WAIT_SECONDS = 30.0


def calls_of(request: Request) -> DeviceCalls:
    calls: DeviceCalls = request.app.state.device_calls
    return calls


Calls = Annotated[DeviceCalls, Depends(calls_of)]


def device_of(principal: Principal) -> str:
    """The device a device key speaks for."""
    if principal.device_id is None:  # device_principal let only device keys through
        raise ApiError(403, "forbidden", "the device routes need a device key")
    return principal.device_id


@router.get("", response_model=DeviceIdentity)
async def me(principal: DeviceKey) -> DeviceIdentity:
    """Which device this key speaks for."""
    return DeviceIdentity(
        key_id=principal.key_id,
        tenant_id=principal.tenant_id,
        device_id=device_of(principal),
    )


@router.post("", response_model=DeviceIdentity)
async def register(body: DeviceRegistration, principal: DeviceKey, calls: Calls) -> DeviceIdentity:
    """Register (or re-register) the device's tools and the specs of its device-local MCP
    tools; the cloud offers those to the model from what is stored here."""
    device_id = device_of(principal)
    await calls.register(principal.tenant_id, device_id, body.tools, body.spec_records())
    return DeviceIdentity(
        key_id=principal.key_id, tenant_id=principal.tenant_id, device_id=device_id
    )


@router.post(
    "/calls/next",
    response_model=OfferedCall,
    responses={204: {"description": "no call within the wait"}},
)
async def next_call(
    principal: DeviceKey,
    gateway: GatewayDep,
    calls: Calls,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_SECONDS)] = 20.0,
) -> OfferedCall | Response:
    """Long-poll: this device's next call (leased to it), or 204 after `wait` seconds; 429
    past the key's open long-polls, 401 once its key is revoked or expires meanwhile;
    403 while its tenant is frozen (a call already taken may still complete)."""
    tenant, device = principal.tenant_id, device_of(principal)
    await calls.check_in(tenant, device)
    hold = gateway.holds.acquire(principal.key_id, POLL)  # 429 past the key's cap
    try:
        found = await calls.next_call(tenant, device, wait, until=hold.ended)
    except PollEnded:
        raise unauthorized() from None
    finally:
        hold.release()
    if found is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return OfferedCall.of(found)


@router.post("/calls/{call_id}/heartbeat", status_code=status.HTTP_204_NO_CONTENT)
async def heartbeat(
    call_id: str,
    principal: DeviceKey,
    calls: Calls,
    lease: Annotated[int | None, Query(ge=1)] = None,
) -> None:
    """Still running: renew the lease (else the call is offered again once it runs out);
    `lease` (OfferedCall.lease): only that one, not a newer offer's (409)."""
    await calls.renew(principal.tenant_id, device_of(principal), call_id, lease)


@router.post("/calls/{call_id}/upload", response_model=UploadTarget)
async def upload_target(
    call_id: str, body: UploadRequest, principal: DeviceKey, calls: Calls
) -> UploadTarget:
    """A presigned PUT for this call's result bound to its sha256 as well as its key."""
    target = await calls.bound_upload(
        principal.tenant_id, device_of(principal), call_id, body.sha256, body.lease
    )
    return UploadTarget.of(target)


@router.post("/calls/{call_id}/complete", response_model=CompletionAnswer)
async def complete(
    call_id: str, body: Completion, principal: DeviceKey, calls: Calls
) -> CompletionAnswer:
    """The call's result (uploaded to its target first) or its error, under the device's
    current lease (409 otherwise). A result whose uploaded object does not match size and
    sha256 is refused (422), nothing committed."""
    done, already = await calls.complete(
        principal.tenant_id, device_of(principal), call_id, body.completion()
    )
    return CompletionAnswer(call_id=done, status="already_committed" if already else "committed")
