"""fetch_url over TLS while connecting to a pinned IP: SNI and the certificate check stay on
the URL's host name (a real HTTPS server on loopback, certificates made with openssl)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.fetch_policy import FetchAllowlist, FetchPolicy
from durable_agents.activities.tools.web import fetch_url
from tests.support.fake_dns import FakeDns

NAME = "secure.example"


class _Hello(BaseHTTPRequestHandler):
    server: _TlsServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hosts.append(self.headers.get("Host", ""))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")


class _TlsServer(ThreadingHTTPServer):
    daemon_threads = True
    hosts: list[str]
    sni: list[str | None]

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client refusing the certificate is what one test expects


@dataclass(frozen=True)
class Tls:
    url: str
    ca: Path
    server: _TlsServer


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certificates(where: Path) -> None:
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=fetch test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign", cwd=where)  # fmt: skip
    _openssl("req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", f"/CN={NAME}",
             cwd=where)  # fmt: skip
    (where / "san.ext").write_text(f"subjectAltName=DNS:{NAME}\n")
    _openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "leaf.pem", "-days", "1", "-extfile", "san.ext",
             cwd=where)  # fmt: skip


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make test certificates")
    where = tmp_path_factory.mktemp("tls")
    _certificates(where)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(where / "leaf.pem", where / "leaf.key")
    httpd = _TlsServer(("127.0.0.1", 0), _Hello)
    httpd.hosts, httpd.sni = [], []

    def record_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        httpd.sni.append(name)

    context.sni_callback = record_sni
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Tls(f"https://{NAME}:{httpd.server_address[1]}/", where / "ca.pem", httpd)
    finally:
        httpd.shutdown()
        httpd.server_close()


def _ctx(tmp_path: Path, dns: FakeDns, allow: str) -> ToolContext:
    policy = FetchPolicy(allow=FetchAllowlist.parse(allow), resolver=dns, timeout_seconds=5.0)
    return ToolContext(
        idempotency_key="tls-1", workspace=tmp_path, tenant_id="t1", session_id="s1", fetch=policy
    )


async def test_tls_to_the_pinned_address_keeps_sni_and_certificate_on_the_host_name(
    tls: Tls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca))  # the operator's CA bundle is honoured
    tls.server.hosts.clear()
    tls.server.sni.clear()
    dns = FakeDns({NAME: [["127.0.0.1"]]})
    out = await fetch_url(_ctx(tmp_path, dns, NAME), {"url": tls.url})
    assert out.content == b"hello"
    assert dns.calls == [NAME]
    assert tls.server.sni == [NAME]
    assert tls.server.hosts == [tls.url.removeprefix("https://").rstrip("/")]


async def test_certificate_for_another_name_is_refused(
    tls: Tls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca))
    tls.server.hosts.clear()
    dns = FakeDns({"other.example": [["127.0.0.1"]]})
    url = tls.url.replace(NAME, "other.example")
    with pytest.raises(ToolError) as err:
        await fetch_url(_ctx(tmp_path, dns, "other.example"), {"url": url})
    # Final, not retried: the same certificate fails the same check every time.
    assert err.value.error_type == "TlsCertificateInvalid"
    assert tls.server.hosts == []
