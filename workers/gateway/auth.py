"""Authentication and scopes: `Authorization: Bearer da_<id>_<secret>`.

`require(scope)` is the dependency every route (and any router added later, e.g. the event
stream) uses: it answers 401 for a missing, malformed, unknown, wrong, revoked or expired
key with one and the same body (no oracle), 429 when the key is over its rate or its client
address failed to authenticate too often, and 403 when the key lacks the scope. The
Principal it returns is where a route takes the tenant from.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from durable_agents.storage.api_keys import SCOPES, ApiKeyRepository, Principal
from durable_agents.workers.gateway.context import gateway_of
from durable_agents.workers.gateway.errors import ApiError

# auto_error=False: a missing header gets our 401 body, not FastAPI's 403.
_bearer = HTTPBearer(auto_error=False, description="An API key from `agentctl keys create`.")
UNAUTHORIZED_MESSAGE = "a valid API key is required (Authorization: Bearer <key>)"


def unauthorized() -> ApiError:
    """The one 401 (no oracle: every reason a key is refused answers this)."""
    return ApiError(
        401, "unauthorized", UNAUTHORIZED_MESSAGE, headers={"WWW-Authenticate": "Bearer"}
    )


def client_address(request: Request) -> str:
    """The peer's address as the socket saw it. X-Forwarded-For is not believed: anyone
    can send it (behind a proxy, every client shares the proxy's address)."""
    return request.client.host if request.client is not None else ""


async def _authenticated(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> Principal:
    """The key's Principal, within its rate; 401 or 429 otherwise."""
    if credentials is None:
        raise unauthorized()
    gateway = gateway_of(request)
    address = client_address(request)
    # An address that failed too often is refused before its key is looked up: guessing
    # keys costs the guesser time, and a valid key from there is no oracle meanwhile.
    throttled = gateway.auth_failures.wait(address)
    if throttled > 0:
        raise ApiError(
            429,
            "auth_throttled",
            "too many failed authentications from this address; retry later",
            headers={"Retry-After": str(max(1, math.ceil(throttled)))},
        )
    async with gateway.resources.sessions() as db:
        found = await ApiKeyRepository(db).authenticate(credentials.credentials)
    if found is None:
        gateway.auth_failures.take(address)
        raise unauthorized()
    wait = await gateway.limiter.take(found.key_id)
    if wait > 0:
        raise ApiError(
            429,
            "rate_limited",
            "too many requests for this key; retry later",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )
    return found


def require(scope: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency yielding the request's Principal once its key has `scope` (a device
    key has none: it is refused here with 403)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    async def principal(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        found = await _authenticated(request, credentials)
        if not found.allows(scope):
            raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope")
        return found

    return principal


async def device_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The Principal of a device key; any other key (admin too) is refused with 403: the
    device routes hand out tool calls and accept results, which only a device may."""
    found = await _authenticated(request, credentials)
    if found.device_id is None:
        raise ApiError(403, "forbidden", "the device routes need a device key")
    return found


Reader = Annotated[Principal, Depends(require("read"))]
Starter = Annotated[Principal, Depends(require("start"))]
Approver = Annotated[Principal, Depends(require("approve"))]
DeviceKey = Annotated[Principal, Depends(device_principal)]
