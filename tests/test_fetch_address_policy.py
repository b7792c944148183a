"""fetch_url refuses internal addresses (issue 11, finding 1: SSRF).

Servers here listen on loopback, which is internal: each test reaches them only through an
allowlist, and a fake resolver (outside the system: DNS) maps public-looking names to them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.fetch_policy import FetchAllowlist, FetchPolicy, Resolver
from durable_agents.activities.tools.internal_addresses import why_internal
from durable_agents.activities.tools.web import fetch_url
from tests.support.fake_dns import FakeDns, no_dns

DENIED_HINT = (
    "internal addresses are not fetched (an operator can allow them with AGENT_FETCH_ALLOW)"
)


class _Recording(BaseHTTPRequestHandler):
    """/page answers "ok"; /redirect?to=URL redirects there. Every request is recorded."""

    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.headers.get("Host", ""), self.path))
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(parts.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"ok" if parts.path == "/page" else b"not found"
        self.send_response(200 if parts.path == "/page" else 404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[tuple[str, str]]


class _Server6(_Server):
    address_family = socket.AF_INET6


@contextmanager
def _serve(httpd: _Server) -> Iterator[_Server]:
    httpd.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def server4_once() -> Iterator[_Server]:
    with _serve(_Server(("127.0.0.1", 0), _Recording)) as httpd:
        yield httpd


@pytest.fixture(scope="module")
def server6_once() -> Iterator[_Server | None]:
    try:
        bound = _Server6(("::1", 0), _Recording)
    except OSError:  # no IPv6 loopback here
        yield None
        return
    with _serve(bound) as httpd:
        yield httpd


@pytest.fixture
def server(server4_once: _Server) -> _Server:
    server4_once.seen.clear()
    return server4_once


@pytest.fixture
def server6(server6_once: _Server | None) -> _Server:
    if server6_once is None:
        pytest.skip("::1 cannot be bound here")
    server6_once.seen.clear()
    return server6_once


def _port(httpd: _Server) -> int:
    return int(httpd.server_address[1])


def _ctx(tmp_path: Path, policy: FetchPolicy) -> ToolContext:
    return ToolContext(
        idempotency_key="fetch-1", workspace=tmp_path, tenant_id="t1", session_id="s1", fetch=policy
    )


def _policy(allow: str = "", dns: Resolver = no_dns) -> FetchPolicy:
    return FetchPolicy(allow=FetchAllowlist.parse(allow), resolver=dns, timeout_seconds=2.0)


async def _denied(tmp_path: Path, policy: FetchPolicy, url: str) -> ToolError:
    with pytest.raises(ToolError) as err:
        await fetch_url(_ctx(tmp_path, policy), {"url": url})
    assert err.value.error_type == "AddressDenied", err.value.message
    assert DENIED_HINT in err.value.message
    return err.value


@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("http://127.0.0.1/", "127.0.0.1, a loopback address"),
        ("http://127.1/", "127.0.0.1, a loopback address"),
        ("http://2130706433/", "127.0.0.1, a loopback address"),
        ("http://0x7f000001/", "127.0.0.1, a loopback address"),
        ("http://[::1]/", "::1, a loopback address"),
        ("http://[::ffff:127.0.0.1]/", "an IPv4-mapped form of 127.0.0.1, a loopback address"),
        ("http://[::ffff:7f00:1]:9333/", "IPv4-mapped form of 127.0.0.1"),
        ("http://[::127.0.0.1]/", "an IPv4-compatible form of 127.0.0.1"),
        ("http://[64:ff9b::7f00:1]/", "a NAT64 form of 127.0.0.1"),
        ("http://[2002:7f00:1::1]/", "6to4 form of 127.0.0.1"),
        ("http://10.1.2.3/", "a private address"),
        ("http://172.16.0.1/", "a private address"),
        ("http://192.168.0.1/", "a private address"),
        ("http://[fc00::1]/", "unique local"),
        ("http://[fd12:3456::1]/", "unique local"),
        ("http://[fec0::1]/", "site-local"),
        ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("http://[::ffff:169.254.169.254]/", "IPv4-mapped form of 169.254.169.254"),
        ("http://[64:ff9b::a9fe:a9fe]/", "NAT64 form of 169.254.169.254"),
        ("http://[fe80::1]/", "a link-local address"),
        ("http://100.64.0.1/", "a carrier-grade NAT address"),
        ("http://224.0.0.1/", "a multicast address"),
        ("http://[ff02::1]/", "a multicast address"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://0/", "unspecified"),
        ("http://[::]/", "an unspecified address"),
        ("http://192.0.2.1/", "a documentation address"),
        ("http://198.51.100.7/", "a documentation address"),
        ("http://203.0.113.9/", "a documentation address"),
        ("http://[2001:db8::1]/", "a documentation address"),
        ("http://198.18.0.1/", "a benchmarking address"),
        ("http://192.0.0.8/", "reserved"),
        ("http://[2001::1]/", "reserved"),  # Teredo
        ("http://240.0.0.1/", "a reserved address"),
        ("http://255.255.255.255/", "a broadcast address"),
        ("https://[::ffff:10.0.0.1]/", "IPv4-mapped form of 10.0.0.1, a private address"),
    ],
)
async def test_internal_literal_is_denied_without_any_network(
    tmp_path: Path, url: str, what: str
) -> None:
    err = await _denied(tmp_path, _policy(), url)
    assert what in err.message
    assert url[:40] in err.message


@pytest.mark.parametrize(
    "address",
    ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"],
)
def test_public_addresses_and_their_ipv6_forms_are_not_internal(address: str) -> None:
    assert why_internal(ip_address(address)) is None


async def test_octal_ipv4_literal_is_refused_as_an_invalid_url(tmp_path: Path) -> None:
    # getaddrinfo would read 0177.0.0.1 as 127.0.0.1; httpx refuses to parse it at all.
    with pytest.raises(ToolError) as err:
        await fetch_url(_ctx(tmp_path, _policy()), {"url": "http://0177.0.0.1/"})
    assert err.value.error_type == "InvalidUrl"


async def test_localhost_through_the_system_resolver_is_denied(tmp_path: Path) -> None:
    err = await _denied(tmp_path, FetchPolicy(), "http://localhost:9/")
    assert "loopback" in err.message


async def test_public_looking_name_resolving_to_loopback_is_denied(
    tmp_path: Path, server: _Server
) -> None:
    dns = FakeDns({"public.example": [["127.0.0.1"]]})
    url = f"http://public.example:{_port(server)}/page"
    err = await _denied(tmp_path, _policy(dns=dns), url)
    assert err.message.startswith(f"fetch_url: '{url}' resolves to 127.0.0.1, a loopback address")
    assert server.seen == []


async def test_a_name_is_denied_if_any_of_its_addresses_is_internal(
    tmp_path: Path, server: _Server
) -> None:
    dns = FakeDns({"mixed.example": [["127.0.0.1", "10.0.0.7"]]})
    url = f"http://mixed.example:{_port(server)}/page"
    err = await _denied(tmp_path, _policy("127.0.0.1", dns), url)
    assert "10.0.0.7, a private address" in err.message
    # Both allowed: the request goes to the first answer, on loopback.
    out = await fetch_url(_ctx(tmp_path, _policy("127.0.0.1,10.0.0.0/8", dns)), {"url": url})
    assert out.content == b"ok"
    assert server.seen == [(f"mixed.example:{_port(server)}", "/page")]


async def test_allowlisted_network_and_host_name_are_fetched_with_the_host_header_kept(
    tmp_path: Path, server: _Server
) -> None:
    port = _port(server)
    by_network = await fetch_url(
        _ctx(tmp_path, _policy("127.0.0.0/8")), {"url": f"http://127.0.0.1:{port}/page"}
    )
    dns = FakeDns({"wiki.internal": [["127.0.0.1"]]})
    by_name = await fetch_url(
        _ctx(tmp_path, _policy("wiki.internal", dns)), {"url": f"http://WIKI.internal.:{port}/page"}
    )
    assert by_network.content == by_name.content == b"ok"
    assert server.seen == [(f"127.0.0.1:{port}", "/page"), (f"wiki.internal.:{port}", "/page")]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/page",
        "http://public.example:{port}/page",
        "http://[::ffff:127.0.0.1]:{port}/page",
        "http://2130706433:{port}/page",
    ],
)
async def test_redirect_from_an_allowed_server_to_an_internal_address_is_denied(
    tmp_path: Path, server: _Server, target: str
) -> None:
    port = _port(server)
    dns = FakeDns({"wiki.internal": [["127.0.0.1"]], "public.example": [["127.0.0.1"]]})
    where = target.format(port=port)
    # Only the host name is allowed, so the same server under another name is not.
    err = await _denied(
        tmp_path, _policy("wiki.internal", dns), f"http://wiki.internal:{port}/redirect?to={where}"
    )
    assert "127.0.0.1" in err.message and "loopback" in err.message
    assert [path for _, path in server.seen] == [f"/redirect?to={where}"]


@pytest.mark.parametrize(
    ("target", "error_type", "absent"),
    [
        ("http://user:hunter2@wiki.internal:{port}/page", "InvalidUrl", "hunter2"),
        ("ftp://wiki.internal/file", "UnsupportedScheme", None),
        ("file:///etc/passwd", "UnsupportedScheme", None),
    ],
)
async def test_redirect_to_credentials_or_another_scheme_is_refused(
    tmp_path: Path, server: _Server, target: str, error_type: str, absent: str | None
) -> None:
    port = _port(server)
    dns = FakeDns({"wiki.internal": [["127.0.0.1"]]})
    with pytest.raises(ToolError) as err:
        await fetch_url(
            _ctx(tmp_path, _policy("wiki.internal", dns)),
            {"url": f"http://wiki.internal:{port}/redirect?to={target.format(port=port)}"},
        )
    assert err.value.error_type == error_type
    # The server's redirect target is shown without the credentials it carried.
    assert absent is None or absent not in err.value.message.split("redirected to")[1]
    assert len(server.seen) == 1


async def test_url_with_credentials_is_refused_before_any_lookup(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as err:
        await fetch_url(_ctx(tmp_path, _policy()), {"url": "http://a:b@example.com/"})
    assert err.value.error_type == "InvalidUrl"
    assert "user name or password" in err.value.message


async def test_connection_goes_to_the_checked_address_even_if_dns_changes_its_answer(
    tmp_path: Path, server: _Server
) -> None:
    # A rebinding name: allowed 127.0.0.1 first, then 127.0.0.2 (not allowed, and nothing
    # listens there). Resolving a second time to connect would miss or reach the wrong host.
    dns = FakeDns({"rebind.example": [["127.0.0.1"], ["127.0.0.2"]]})
    port = _port(server)
    out = await fetch_url(
        _ctx(tmp_path, _policy("127.0.0.1", dns)), {"url": f"http://rebind.example:{port}/page"}
    )
    assert out.content == b"ok"
    assert dns.calls == ["rebind.example"]
    assert server.seen == [(f"rebind.example:{port}", "/page")]


async def test_resolver_is_consulted_once_per_hop(tmp_path: Path, server: _Server) -> None:
    port = _port(server)
    dns = FakeDns({"a.example": [["127.0.0.1"]], "b.example": [["127.0.0.1"]]})
    inner = f"http://b.example:{port}/redirect?to=/page"
    out = await fetch_url(
        _ctx(tmp_path, _policy("127.0.0.1", dns)),
        {"url": f"http://a.example:{port}/redirect?to={inner}"},
    )
    assert out.content == b"ok"
    assert dns.calls == ["a.example", "b.example", "b.example"]
    assert [host for host, _ in server.seen] == [
        f"a.example:{port}",
        f"b.example:{port}",
        f"b.example:{port}",
    ]


async def test_ipv6_loopback_server_is_reached_only_through_the_allowlist(
    tmp_path: Path, server6: _Server
) -> None:
    port = _port(server6)
    err = await _denied(tmp_path, _policy(), f"http://[::1]:{port}/page")
    assert "::1, a loopback address" in err.message
    dns = FakeDns({"v6.example": [["::1"]]})
    err = await _denied(tmp_path, _policy(dns=dns), f"http://v6.example:{port}/page")
    assert server6.seen == []

    by_network = await fetch_url(
        _ctx(tmp_path, _policy("::1/128")), {"url": f"http://[::1]:{port}/page"}
    )
    by_name = await fetch_url(
        _ctx(tmp_path, _policy("v6.example", dns)), {"url": f"http://v6.example:{port}/page"}
    )
    assert by_network.content == by_name.content == b"ok"
    assert server6.seen == [(f"[::1]:{port}", "/page"), (f"v6.example:{port}", "/page")]
