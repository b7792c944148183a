"""What fetch_url may reach and how long it may take: one frozen policy per worker.

Built from AgentSettings (AGENT_FETCH_ALLOW, AGENT_FETCH_MAX_BYTES, AGENT_FETCH_TIMEOUT_SECONDS)
and handed to the tool through ToolContext. The resolver is part of the policy so a test (or
an operator with its own DNS) can swap it without touching the tool.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_network

from durable_agents.activities.tools.internal_addresses import IPAddress, embedded_ipv4, ip_literal

# host -> every address it resolves to, as strings ("127.0.0.1", "::1").
Resolver = Callable[[str], Awaitable[Sequence[str]]]

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
# An address with a prefix length, or an IPv6 address: not to be mistaken for a host name.
_NETWORKISH = re.compile(r"^[0-9a-f.:]+/.*$|^[0-9a-f.]*:[0-9a-f.:]*$", re.IGNORECASE)


async def system_resolver(host: str) -> list[str]:
    """Every address the event loop's getaddrinfo gives for `host`, in its order, once each."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def normal_host(host: str) -> str:
    """Host names compare case-insensitively and without a trailing root dot."""
    return host.lower().removesuffix(".")


@dataclass(frozen=True)
class FetchAllowlist:
    """Internal networks and host names an operator lets fetch_url reach deliberately."""

    networks: tuple[IPv4Network | IPv6Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: str | Iterable[str]) -> FetchAllowlist:
        """Parse "10.0.0.0/8,wiki.internal" (or a list of entries); ValueError names a bad one."""
        if isinstance(entries, str):
            entries = entries.split(",")
        networks: list[IPv4Network | IPv6Network] = []
        hosts: set[str] = set()
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            network = _network(entry)
            if network is not None:
                networks.append(network)
            else:
                hosts.add(_host_name(entry))
        return cls(tuple(networks), frozenset(hosts))

    def allows_host(self, host: str) -> bool:
        return normal_host(host) in self.hosts

    def allows_address(self, ip: IPAddress) -> bool:
        """True if `ip`, or the IPv4 address an IPv6 form of it carries, is in a network."""
        candidates: list[IPAddress] = [ip]
        embedded = embedded_ipv4(ip) if isinstance(ip, IPv6Address) else None
        if embedded is not None:
            candidates.append(embedded[1])
        return any(c in net for c in candidates for net in self.networks)

    def __str__(self) -> str:
        return ",".join([*map(str, self.networks), *sorted(self.hosts)])


def _network(entry: str) -> IPv4Network | IPv6Network | None:
    looks_numeric = ip_literal(entry) is not None or bool(_NETWORKISH.match(entry))
    if not looks_numeric:
        return None
    try:
        # strict: "10.0.0.1/8" is more likely a typo than a wish to allow all of 10/8.
        return ip_network(entry, strict=True)
    except ValueError as exc:
        raise ValueError(
            f"fetch allowlist entry {entry!r} is not a valid IP network ({exc}); "
            "write e.g. 10.0.0.0/8, 192.168.1.7 or fd00::/8"
        ) from None


def _host_name(entry: str) -> str:
    name = normal_host(entry)
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_name = ""
    labels = ascii_name.split(".")
    if not ascii_name or len(ascii_name) > 253 or not all(_LABEL.match(x) for x in labels):
        raise ValueError(
            f"fetch allowlist entry {entry!r} is neither an IP network nor a host name; "
            "write e.g. 10.0.0.0/8 or wiki.internal (no scheme, port, path or wildcard)"
        )
    return ascii_name


DEFAULT_FETCH_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_FETCH_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True)
class FetchPolicy:
    """Where fetch_url may connect (internal addresses only if allowed) and its limits.

    `timeout_seconds` caps one whole fetch, every redirect hop included.
    """

    allow: FetchAllowlist = FetchAllowlist()
    resolver: Resolver = system_resolver
    max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    timeout_seconds: float = DEFAULT_FETCH_TIMEOUT_SECONDS


# The default everywhere a policy is not given: public addresses only, default limits.
PUBLIC_ONLY = FetchPolicy()
