"""Every gateway answer carries the same security headers (one middleware around the whole
app: JSON, errors, 500s, the schema, the page and its files, artifact bytes), the page's
document is the only one allowed to run script, no third-party script is served, and a
download is never served as the type a tool or device stored (issue 29 findings 4, 5)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from temporalio.client import Client

from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.download_types import BYTES_TYPE, TEXT_TYPE, download_headers
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, make_key

COMMON = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-resource-policy": "same-origin",
}


@pytest.mark.parametrize(
    ("stored", "served", "disposition"),
    [
        ("text/html", TEXT_TYPE, "inline"),
        ("TEXT/HTML; charset=utf-16", TEXT_TYPE, "inline"),
        (" text/html ;x=1", TEXT_TYPE, "inline"),
        ("application/xhtml+xml", TEXT_TYPE, "inline"),
        ("image/svg+xml", TEXT_TYPE, "inline"),
        ("text/xml", TEXT_TYPE, "inline"),
        ("application/json", TEXT_TYPE, "inline"),
        ("application/javascript", TEXT_TYPE, "inline"),
        ("text/plain", TEXT_TYPE, "inline"),
        ("image/png", "image/png", "inline"),
        ("IMAGE/JPEG", "image/jpeg", "inline"),
        ("application/pdf", BYTES_TYPE, "attachment"),
        ("application/octet-stream", BYTES_TYPE, "attachment"),
        ("multipart/x-mixed-replace; boundary=x", BYTES_TYPE, "attachment"),
        ("", BYTES_TYPE, "attachment"),
        ("text/html\r\nX-Injected: 1", TEXT_TYPE, "inline"),
    ],
)
def test_a_download_is_served_as_text_an_image_or_an_attachment(
    stored: str, served: str, disposition: str
) -> None:
    got = download_headers(stored, "ab" * 32)
    assert got.content_type == served
    assert got.disposition.split(";")[0] == disposition
    if disposition == "attachment":
        assert got.disposition == 'attachment; filename="artifact-abababababababab"'


def _app(stack: StackEndpoints, res: Resources, client: Client, tmp_path: Path) -> FastAPI:
    settings = stack.settings(workspace=tmp_path, task_queue="unused", provider="scripted")
    settings.gateway = GatewaySettings(rate_per_second=1000, burst=1000)
    app = create_app(res, client, settings)

    @app.get("/test-boom", include_in_schema=False)
    async def boom() -> None:
        raise RuntimeError("an unhandled failure")

    return app


def _secured(answer: httpx.Response, *, page: bool = False) -> None:
    where = f"{answer.request.method} {answer.request.url.path} ({answer.status_code})"
    for name, value in COMMON.items():
        assert answer.headers.get(name) == value, (where, name)
    policy = answer.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy, where
    if page:
        assert "script-src 'self'" in policy and "sandbox" not in policy, where
    else:
        assert policy.endswith("sandbox") and "script-src" not in policy, where


async def test_every_route_answers_with_the_security_headers(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Path
) -> None:
    app = _app(migrated, resources, client, tmp_path)
    key = await make_key(resources, tenant, "read")
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        # Each API route, unauthenticated (refused before it does anything: even a stream
        # or a long-poll answers at once), with any path parameter filled in.
        checked = 0
        for template, operations in app.openapi()["paths"].items():
            path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), template)
            for method in operations:
                _secured(await http.request(method.upper(), path))
                checked += 1
        assert checked >= 20

        # Answers with content, errors of every kind, the schema and the page's files.
        _secured(await http.get("/v1/me", headers=bearer(key)))
        _secured(await http.get("/v1/sessions", headers=bearer(key)))
        _secured(await http.get("/v1/sessions/not-a-session", headers=bearer(key)))
        _secured(await http.post("/v1/sessions", headers=bearer(key), content=b"{"))
        _secured(await http.get("/healthz"))
        _secured(await http.get("/openapi.json"))
        _secured(await http.get("/no-such-route"))
        _secured(await http.delete("/healthz"))  # 405
        boom = await http.get("/test-boom")
        assert boom.status_code == 500 and "an unhandled failure" not in boom.text
        _secured(boom)
        for asset in ("/web/app.css", "/web/js/app.js", "/web/no-such-file"):
            answer = await http.get(asset)
            _secured(answer)
        _secured(await http.get("/"), page=True)
        _secured(await http.get("/web/index.html"), page=True)


async def test_no_html_docs_and_no_third_party_script(
    migrated: StackEndpoints, resources: Resources, client: Client, tmp_path: Path
) -> None:
    app = _app(migrated, resources, client, tmp_path)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        docs, redoc = await http.get("/docs"), await http.get("/redoc")
        spec = await http.get("/openapi.json")
        page = await http.get("/")
    # FastAPI's docs pages load Swagger UI / ReDoc from a CDN: not served at all.
    assert (docs.status_code, redoc.status_code) == (404, 404)
    assert spec.status_code == 200 and "/v1/sessions" in spec.json()["paths"]
    # The page's scripts and styles are its own files, named by path (no origin).
    sources = re.findall(r'(?:src|href)="([^"]*)"', page.text)
    assert sources and all(s.startswith("/web/") or s.startswith("#") for s in sources), sources


async def test_a_streamed_download_is_never_served_as_its_stored_type(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Path
) -> None:
    """A compressed object is streamed by the gateway itself, on the page's origin."""
    data = b"<html><body>" + b"<p>filler</p>" * 200 + b"<script>alert(1)</script></body></html>"
    s = resources.store
    store = ArtifactStore(s.client, s.bucket, s.prefix, compress=True)
    ref = await store.put(tenant, data, "text/html")
    async with resources.sessions() as db, db.begin():
        artifact_id = await register_uploaded(db, store, ref, data)
    key = await make_key(resources, tenant, "read")
    app = _app(migrated, resources, client, tmp_path)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        got = await http.get(f"/v1/artifacts/{artifact_id}", headers=bearer(key))
        link = await http.get(f"/v1/artifacts/{artifact_id}/link", headers=bearer(key))
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-type"] == TEXT_TYPE
    assert got.headers["content-disposition"] == "inline"
    _secured(got)
    _secured(link)
    assert link.json()["content_type"] == "text/html"  # what was stored, as information
