"""Which IP addresses are internal: the ones fetch_url will not connect to unless allowed.

An explicit table rather than ipaddress's is_private/is_global alone: their coverage has
changed between Python releases, and the table's names tell the model *what* the address
is. `is_global` is still consulted last, as a second opinion that can only deny more.
"""

from __future__ import annotations

import re
import socket
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

IPAddress = IPv4Address | IPv6Address
_Table = tuple[tuple[IPv4Network | IPv6Network, str], ...]

_V4: _Table = tuple(
    (IPv4Network(net), what)
    for net, what in (
        # Most specific first: the broadcast address also lies in 240.0.0.0/4.
        ("255.255.255.255/32", "a broadcast address"),
        ("0.0.0.0/8", "an unspecified ('this network') address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a carrier-grade NAT address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "a reserved (IETF protocol assignment) address"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a reserved (6to4 relay) address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
    )
)

_V6: _Table = tuple(
    (IPv6Network(net), what)
    for net, what in (
        ("::/128", "an unspecified address"),
        ("::1/128", "a loopback address"),
        ("64:ff9b:1::/48", "a private (local-use NAT64) address"),
        ("100::/64", "a reserved (discard-only) address"),
        # Teredo, ORCHID, benchmarking (2001:2::/48) and other protocol assignments.
        ("2001::/23", "a reserved (IETF protocol assignment) address"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("fc00::/7", "a private (unique local) address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a private (site-local) address"),
        ("ff00::/8", "a multicast address"),
    )
)

# Everything routable on the IPv6 internet is in 2000::/3; the rest is reserved.
_V6_GLOBAL_UNICAST = IPv6Network("2000::/3")
_V6_MAPPED = IPv6Network("::ffff:0:0/96")
_V6_TRANSLATED = IPv6Network("::ffff:0:0:0/96")  # SIIT (RFC 2765)
_V6_COMPATIBLE = IPv6Network("::/96")  # deprecated IPv4-compatible
_V6_NAT64 = IPv6Network("64:ff9b::/96")
_V6_6TO4 = IPv6Network("2002::/16")

# The numeric host forms inet_aton (and so getaddrinfo, curl, browsers) reads as IPv4:
# 127.1, 2130706433, 0x7f000001, 0177.0.0.1.
_LEGACY_V4 = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$", re.IGNORECASE)


def ip_literal(host: str) -> IPAddress | None:
    """The address `host` spells if it is an IP literal in any form, else None."""
    try:
        return ip_address(host)
    except ValueError:
        pass
    if _LEGACY_V4.match(host):
        try:
            return IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def embedded_ipv4(ip: IPv6Address) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, NAT64, 6to4), if any."""
    low32 = IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _V6_MAPPED:
        return "IPv4-mapped", low32
    if ip in _V6_TRANSLATED:
        return "IPv4-translated", low32
    if ip in _V6_COMPATIBLE:
        return "IPv4-compatible", low32
    if ip in _V6_NAT64:
        return "NAT64", low32
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    return None


def why_internal(ip: IPAddress) -> str | None:
    """None for a public address; otherwise what it is, e.g. 'a loopback address'."""
    if isinstance(ip, IPv4Address):
        return _lookup(ip, _V4) or _not_global(ip)
    if ip.scope_id:
        ip = IPv6Address(int(ip))  # the scope names an interface, not a different address
    # :: and ::1 lie inside the IPv4-compatible range, but are what they are.
    special = _lookup(ip, _V6[:2])
    if special:
        return special
    embedded = embedded_ipv4(ip)
    if embedded is not None:
        form, v4 = embedded
        inner = why_internal(v4)
        article = "an" if form.startswith("IPv4") else "a"
        return f"{article} {form} form of {v4}, {inner}" if inner else None
    known = _lookup(ip, _V6)
    if known:
        return known
    if ip not in _V6_GLOBAL_UNICAST:
        return "a reserved address"
    return _not_global(ip)


def _lookup(ip: IPAddress, table: _Table) -> str | None:
    for net, what in table:
        if ip in net:
            return what
    return None


def _not_global(ip: IPAddress) -> str | None:
    return None if ip.is_global else "a reserved address"
