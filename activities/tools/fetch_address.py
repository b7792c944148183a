"""The one address a fetch hop connects to: resolved once, every answer checked.

Resolving once and connecting to exactly the checked address closes the DNS-rebinding
window a check-then-let-the-client-resolve design leaves open.
"""

from __future__ import annotations

import socket
from ipaddress import ip_address

from durable_agents.activities.tools.base import ToolError, TransientToolError
from durable_agents.activities.tools.fetch_policy import FetchPolicy
from durable_agents.activities.tools.internal_addresses import IPAddress, ip_literal, why_internal

ALLOW_SETTING = "AGENT_FETCH_ALLOW"

# getaddrinfo's "this name does not exist" answers; anything else may heal on retry.
_NO_SUCH_NAME = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


async def checked_address(policy: FetchPolicy, host: str, shown: str) -> IPAddress:
    """The address to connect to for `host`; ToolError("AddressDenied") if any is internal.

    `host` is the URL's ASCII host (IDNA-encoded, no brackets); `shown` is how the error
    names the URL. A name with several addresses is allowed only if every one is.
    """
    literal = ip_literal(host)
    addresses = [literal] if literal is not None else await _resolve(policy, host, shown)
    if literal is None and policy.allow.allows_host(host):
        return addresses[0]
    for ip in addresses:
        if policy.allow.allows_address(ip):
            continue
        why = why_internal(ip)
        if why is not None:
            raise ToolError(
                "AddressDenied",
                f"fetch_url: {shown} resolves to {ip}, {why}; internal addresses are not "
                f"fetched (an operator can allow them with {ALLOW_SETTING})",
            )
    return addresses[0]


async def _resolve(policy: FetchPolicy, host: str, shown: str) -> list[IPAddress]:
    try:
        answers = await policy.resolver(host)
    except socket.gaierror as exc:
        if exc.errno in _NO_SUCH_NAME:
            raise ToolError(
                "UnknownHost", f"fetch_url: the host of {shown} does not exist"
            ) from exc
        raise TransientToolError(
            f"fetch_url: name resolution failed (gaierror {exc.errno})"
        ) from None
    except OSError as exc:
        raise TransientToolError(
            f"fetch_url: name resolution failed ({type(exc).__name__})"
        ) from None
    addresses = [ip_address(a) for a in answers]
    if not addresses:
        raise ToolError("UnknownHost", f"fetch_url: the host of {shown} has no address")
    return addresses
