"""fetch_url against a real local HTTP server running in a thread (on loopback, so the
context's policy allows 127.0.0.1; the address rules are tests/test_fetch_address_policy.py)."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter

from durable_agents.activities.tools.base import ToolContext, ToolError, TransientToolError
from durable_agents.activities.tools.fetch_policy import FetchAllowlist, FetchPolicy
from durable_agents.activities.tools.web import MAX_REDIRECTS, fetch_url

LIMIT = 64 * 1024


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # keep pytest output clean

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.path
        if path == "/page":
            self._send(200, "<p>café</p>".encode("latin-1"), "text/html; charset=iso-8859-1")
        elif path.startswith("/exact/"):
            self._send(200, b"x" * int(path.rsplit("/", 1)[1]), "application/octet-stream")
        elif path == "/declared-big":
            self._send(200, b"y" * (LIMIT * 4), "application/octet-stream")
        elif path == "/undeclared-big":
            # HTTP/1.0 without Content-Length: the body ends when the connection closes.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(64):
                self.wfile.write(b"z" * 16 * 1024)
        elif path == "/gzip-bomb":
            packed = gzip.compress(b"\0" * (LIMIT * 50))
            self._send(200, packed, "text/plain", Content_Encoding="gzip")
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            self._send(code, b"status page", "text/plain")
        elif path.startswith("/hop/"):
            left = int(path.rsplit("/", 1)[1])
            if left == 0:
                self._redirect("/page")
            else:
                self._redirect(f"/hop/{left - 1}")
        elif path == "/to-file":
            self._redirect("file:///etc/passwd")
        elif path == "/drip":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                for _ in range(30):
                    self.wfile.write(b".")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass  # the client gave up, as it should
        else:
            self._send(404, b"not found", "text/plain")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("all_proxy", raising=False)


def ctx(tmp_path: Path, timeout: float = 5.0) -> ToolContext:
    return ToolContext(
        idempotency_key="fetch-1",
        workspace=tmp_path,
        tenant_id="t1",
        session_id="s1",
        fetch=FetchPolicy(
            allow=FetchAllowlist.parse("127.0.0.1"), max_bytes=LIMIT, timeout_seconds=timeout
        ),
    )


async def test_fetch_keeps_body_and_content_type(server: str, tmp_path: Path) -> None:
    out = await fetch_url(ctx(tmp_path), {"url": f"{server}/page"})
    assert out.content == "<p>café</p>".encode("latin-1")
    assert out.content_type == "text/html; charset=iso-8859-1"


async def test_fetch_exactly_at_limit_is_allowed(server: str, tmp_path: Path) -> None:
    out = await fetch_url(ctx(tmp_path), {"url": f"{server}/exact/{LIMIT}"})
    assert len(out.content) == LIMIT
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"{server}/exact/{LIMIT + 1}"})
    assert err.value.error_type == "ResponseTooLarge"
    assert str(LIMIT) in err.value.message


@pytest.mark.parametrize("path", ["/declared-big", "/undeclared-big", "/gzip-bomb"])
async def test_fetch_size_limit(server: str, tmp_path: Path, path: str) -> None:
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"{server}{path}"})
    assert err.value.error_type == "ResponseTooLarge"
    assert "byte limit" in err.value.message


@pytest.mark.parametrize("code", [400, 403, 404, 410])
async def test_fetch_4xx_is_http_error(server: str, tmp_path: Path, code: int) -> None:
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"{server}/status/{code}"})
    assert err.value.error_type == "HttpError"
    assert str(code) in err.value.message


@pytest.mark.parametrize("code", [500, 502, 503, 429])
async def test_fetch_5xx_is_transient(server: str, tmp_path: Path, code: int) -> None:
    with pytest.raises(TransientToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"{server}/status/{code}"})
    assert not isinstance(err.value, ToolError)
    assert str(code) in str(err.value)


async def test_fetch_connection_refused_is_transient(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TransientToolError):
        await fetch_url(ctx(tmp_path), {"url": f"http://127.0.0.1:{port}/"})


async def test_fetch_overall_timeout_is_a_tool_error_not_a_retry(
    server: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path, timeout=0.5), {"url": f"{server}/drip"})
    # Each byte arrives within the per-read timeout; only the overall deadline stops it, and
    # a retry would only drip again: the model is told instead.
    assert err.value.error_type == "FetchTooSlow"
    assert "0.5 seconds" in err.value.message
    assert time.monotonic() - started < 2.0


async def test_fetch_follows_limited_redirects(server: str, tmp_path: Path) -> None:
    # /hop/N is N + 1 redirects away from /page.
    ok = await fetch_url(ctx(tmp_path), {"url": f"{server}/hop/{MAX_REDIRECTS - 1}"})
    assert ok.content_type.startswith("text/html")
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"{server}/hop/{MAX_REDIRECTS}"})
    assert err.value.error_type == "TooManyRedirects"


async def test_fetch_redirect_to_file_scheme_rejected(server: str, tmp_path: Path) -> None:
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"{server}/to-file"})
    assert err.value.error_type == "UnsupportedScheme"


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com", "data:,hi"]
)
async def test_fetch_rejects_non_http_schemes(tmp_path: Path, url: str) -> None:
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": url})
    assert err.value.error_type == "UnsupportedScheme"


@pytest.mark.parametrize("args", [{}, {"url": 5}, {"url": "  "}, {"_raw": "{url:"}])
async def test_fetch_invalid_arguments(tmp_path: Path, args: dict[str, object]) -> None:
    with pytest.raises(ToolError) as err:
        await fetch_url(ctx(tmp_path), args)
    assert err.value.error_type == "InvalidArguments"


def _history_messages(err: BaseException) -> list[str]:
    """The messages Temporal records in history for an activity failing with `err`."""
    failure = Failure()
    converter = DataConverter.default
    converter.failure_converter.to_failure(err, converter.payload_converter, failure)
    messages = [failure.message]
    while failure.HasField("cause"):
        failure = failure.cause
        messages.append(failure.message)
    return messages


async def test_transient_errors_name_no_url_because_they_land_in_workflow_history(
    server: str, tmp_path: Path
) -> None:
    with pytest.raises(TransientToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"{server}/status/503"})
    assert _history_messages(err.value) == ["fetch_url: HTTP status 503"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TransientToolError) as err:
        await fetch_url(ctx(tmp_path), {"url": f"http://127.0.0.1:{port}/secret-path"})
    # No cause chain either: Temporal would record httpx's own message under it.
    assert _history_messages(err.value) == ["fetch_url: request failed (ConnectError)"]


async def test_server_that_accepts_but_never_answers_ends_at_the_cap_as_a_tool_error(
    tmp_path: Path,
) -> None:
    # The kernel completes the handshake for the backlog; nothing ever reads or answers.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
        started = time.monotonic()
        with pytest.raises(ToolError) as err:
            await fetch_url(ctx(tmp_path, timeout=0.5), {"url": url})
    assert err.value.error_type == "FetchTooSlow"
    assert time.monotonic() - started < 2.0
