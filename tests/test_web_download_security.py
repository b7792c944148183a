"""Downloads never render active content, and no page but the app's own reads its key:
issue 29 findings 4 and 5, in a real browser (Debian's chromium) against the real gateway
over HTTP and the real object store.

Tool results whose stored type is untrusted — a fetched page's text/html, an SVG, an XHTML
page, a device's declared text/html, and a compressed HTML page the gateway streams itself —
carry a script that reports to a loopback "marker" server. Opened with the page's "Open full
result" (the presigned store URL) or fetched from the gateway, none runs; the same objects
opened through a store URL signed the old way (the stored type, no overrides) do run,
so the payloads are live and the overrides are what stops them. Screenshots go to
$WEB_SCREENSHOTS/downloads (default .artifacts/screenshots/downloads/)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
from playwright.async_api import Page, expect
from temporalio.client import Client

from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.download_types import TEXT_TYPE
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.browser import chromium, sign_in
from tests.support.gateway import gateway_server, make_key

SCREENSHOTS = (
    Path(
        os.environ.get("WEB_SCREENSHOTS", Path(__file__).parents[1] / ".artifacts" / "screenshots")
    )
    / "downloads"
)
# Reads sessionStorage from whatever document the tab shows (an opaque origin cannot).
READ_STORAGE = "() => { try { return sessionStorage.length } catch (e) { return 'denied' } }"


class Marker:
    """A loopback HTTP server that records the path of every request a payload makes."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.hit = asyncio.Event()  # set on each request
        self.url = ""

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            self.hits.append(head.split(" ", 2)[1])
            self.hit.set()
            writer.write(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
            await writer.drain()
        writer.close()

    def ran(self) -> set[str]:
        return {hit.split("/ran/", 1)[1].split("?")[0] for hit in self.hits if "/ran/" in hit}


@asynccontextmanager
async def marker_server() -> AsyncIterator[Marker]:
    marker = Marker()
    server = await asyncio.start_server(marker._answer, "127.0.0.1", 0)
    marker.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        yield marker


def _script(marker: Marker, name: str) -> str:
    """A script that, if it runs, reports to the marker whether it could read the key."""
    return (
        "let k; try { k = String(sessionStorage.length) } catch (e) { k = 'denied' }"
        f" fetch('{marker.url}/ran/{name}?storage=' + k, {{mode: 'no-cors'}});"
    )


def _payloads(marker: Marker) -> dict[str, tuple[str, bytes]]:
    """name -> (the type a tool or device stored it as, its bytes)."""
    html = "<html><body><h1>Fetched page</h1><script>{}</script></body></html>"
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>{}</script></svg>'
    xhtml = '<html xmlns="http://www.w3.org/1999/xhtml"><body><script>{}</script></body></html>'
    return {
        "fetched-html": (
            "text/html; charset=utf-8",
            html.format(_script(marker, "fetched-html")).encode(),
        ),
        "svg": ("image/svg+xml", svg.format(_script(marker, "svg")).encode()),
        "xhtml": ("application/xhtml+xml", xhtml.format(_script(marker, "xhtml")).encode()),
        "device-html": ("TEXT/HTML", html.format(_script(marker, "device-html")).encode()),
    }


async def _seed(
    res: Resources, tenant: str, payloads: dict[str, tuple[str, bytes]], *, compress: bool
) -> tuple[uuid.UUID, dict[str, uuid.UUID]]:
    """A session with one tool result per payload, each with its artifact, committed as a
    tool's result is (upload, register, then the item naming it)."""
    s = res.store
    store = ArtifactStore(s.client, s.bucket, s.prefix, compress=compress)
    sid, ids = uuid.uuid4(), {}
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="downloads", model_config={})
        items = ItemRepository(db, tenant)
        for name, (content_type, data) in payloads.items():
            ref = await store.put(tenant, data, content_type)
            ids[name] = await register_uploaded(db, store, ref, data)
            await items.append(
                NewItem(
                    session_id=sid,
                    kind="tool_result",
                    role="tool",
                    idempotency_key=f"{sid}:{name}",
                    text=f"result of {name}",
                    tool_call_id=f"call_{name}",
                    tool_name=name,
                    data={"artifact": {"size_bytes": len(data), "content_type": content_type}},
                    artifact_id=ids[name],
                )
            )
    return sid, ids


async def _signed_in(page: Page, base: str, key: str) -> None:
    await sign_in(page, base, key)
    await expect(page.locator("#app")).to_be_visible()
    assert await page.evaluate(READ_STORAGE) == 1  # the key, in the app's own tab


async def _settle() -> None:
    # A script that ran has reported by now: each tab was loaded (and is still open) before.
    await asyncio.sleep(1.0)


async def _reported(marker: Marker, names: set[str], within_seconds: float = 15) -> set[str]:
    """What ran, once `names` all reported or the time is up."""
    async with asyncio.timeout(within_seconds):
        while True:
            marker.hit.clear()
            if names <= marker.ran():
                return marker.ran()
            await marker.hit.wait()


async def test_open_full_result_never_runs_a_results_script(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Path
) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    key = await make_key(resources, tenant, "read", user="ann")
    async with (
        marker_server() as marker,
        gateway_server(migrated, resources, client, queue="unused", workspace=tmp_path) as base,
        chromium() as browser,
    ):
        payloads = _payloads(marker)
        sid, ids = await _seed(resources, tenant, payloads, compress=False)
        context = await browser.new_context(viewport={"width": 1100, "height": 700})
        page = await context.new_page()
        seen: list[str] = []
        page.on("console", lambda m: seen.append(f"console {m.type}: {m.text}"))
        page.on("response", lambda r: seen.append(f"{r.status} {r.request.method} {r.url}"))
        page.on("requestfailed", lambda r: seen.append(f"failed {r.url} {r.failure}"))
        await _signed_in(page, base, key)
        await page.locator(f'[data-testid="session-row"][data-session="{sid}"]').click()
        buttons = page.get_by_test_id("open-artifact")
        try:
            await expect(buttons).to_have_count(len(payloads))
        except AssertionError:  # what the page showed and asked, for a run that fails here
            state = await page.locator("#stream-state").inner_text()
            view = await page.locator("#session").inner_text()
            raise AssertionError(f"stream: {state}; session: {view[:1000]}; {seen[-30:]}") from None
        await page.screenshot(path=SCREENSHOTS / "session-with-results.png", full_page=True)
        shown: dict[str, tuple[str, int]] = {}
        tabs = []
        for name in payloads:
            async with context.expect_page() as opened:
                await buttons.and_(page.locator(f'[data-artifact="{ids[name]}"]')).click()
            tab = await opened.value
            await tab.wait_for_load_state()
            await tab.screenshot(path=SCREENSHOTS / f"open-full-result-{name}.png")
            shown[name] = (
                await tab.evaluate("document.contentType"),
                await tab.evaluate("document.querySelectorAll('script').length"),
            )
            tabs.append(tab)
        await _settle()
        for tab in tabs:
            await tab.close()
        assert marker.ran() == set(), f"scripts ran on the store's origin: {marker.hits}"
        # Shown as text: the markup is the result's words, no element was made of it.
        assert shown == {name: ("text/plain", 0) for name in payloads}

        # The control: the same objects through a URL signed as before (the stored type).
        store = resources.store
        for name, (content_type, data) in payloads.items():
            ref = store.ref_for(tenant, hashlib.sha256(data).hexdigest(), len(data), content_type)
            url = await store.client.generate_presigned_url(
                "get_object", Params={"Bucket": store.bucket, "Key": ref.key}, ExpiresIn=60
            )
            tab = await context.new_page()
            await tab.goto(url)
            await tab.screenshot(path=SCREENSHOTS / f"control-stored-type-{name}.png")
        assert await _reported(marker, set(payloads)) == set(payloads), marker.hits
        await context.close()


async def test_no_gateway_page_but_the_apps_runs_script_or_reads_the_key(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Path
) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    key = await make_key(resources, tenant, "read", user="ann")
    async with (
        marker_server() as marker,
        gateway_server(migrated, resources, client, queue="unused", workspace=tmp_path) as base,
        chromium() as browser,
    ):
        # Large enough to be stored compressed: the gateway streams it itself (decoded).
        html = _payloads(marker)["fetched-html"][1].replace(b"<h1>", b"<h1>" + b"padding " * 400)
        _, ids = await _seed(
            resources, tenant, {"gateway-html": ("text/html", html)}, compress=True
        )
        context = await browser.new_context(viewport={"width": 1100, "height": 700})
        page = await context.new_page()
        await _signed_in(page, base, key)

        # Every other document of the gateway's origin, in the tab that holds the key: none
        # can read it (sandboxed: an opaque origin). The HTML docs, with their CDN scripts,
        # are gone; the schema stays.
        readable, statuses = {}, {}
        for path in ("/docs", "/redoc", "/openapi.json", "/v1/me", "/web/no-such-file"):
            answer = await page.goto(base + path)
            statuses[path] = answer.status if answer is not None else None
            readable[path] = await page.evaluate(READ_STORAGE)
            await page.screenshot(path=SCREENSHOTS / f"route{path.replace('/', '-')}.png")
        assert readable == dict.fromkeys(readable, "denied")
        assert statuses == {
            "/docs": 404,
            "/redoc": 404,
            "/openapi.json": 200,
            "/v1/me": 401,
            "/web/no-such-file": 404,
        }

        # The gateway's own stream of a compressed HTML result, opened in the signed-in tab.
        await page.goto(base)
        await page.set_extra_http_headers({"Authorization": f"Bearer {key}"})
        answer = await page.goto(f"{base}/v1/artifacts/{ids['gateway-html']}")
        await page.screenshot(path=SCREENSHOTS / "gateway-streamed-html.png")
        await _settle()
        assert marker.ran() == set(), f"a script ran on the gateway's origin: {marker.hits}"
        assert answer is not None and answer.status == 200
        assert answer.headers["content-type"] == TEXT_TYPE
        assert "sandbox" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert await page.evaluate("document.contentType") == "text/plain"
        await context.close()


async def test_presigned_links_name_a_safe_type_whatever_was_stored(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    """The store honours the overrides (checked without a browser, for every kind)."""
    kinds = {
        "text/html": (TEXT_TYPE, "inline"),
        "image/svg+xml": (TEXT_TYPE, "inline"),
        "image/png": ("image/png", "inline"),
        "application/pdf": ("application/octet-stream", "attachment"),
    }
    store = resources.store
    async with httpx.AsyncClient() as http:
        for stored, (served, disposition) in kinds.items():
            data = f"<html><script>alert(1)</script>{stored}</html>".encode()
            ref = await store.put(tenant, data, stored)
            got = await http.get(await store.presigned_url(tenant, ref))
            assert got.status_code == 200 and got.content == data
            assert got.headers["content-type"] == served, stored
            assert got.headers["content-disposition"].startswith(disposition), stored
        # The overrides are signed: a link edited back to the stored type is refused.
        page = await store.put(tenant, b"<script>alert(1)</script>", "text/html")
        parts = urlsplit(await store.presigned_url(tenant, page))
        query = dict(parse_qsl(parts.query))
        assert query["response-content-type"] == TEXT_TYPE
        edited = {**query, "response-content-type": "text/html"}
        dropped = {k: v for k, v in query.items() if not k.startswith("response-")}
        for changed in (edited, dropped):
            forged = await http.get(urlunsplit(parts._replace(query=urlencode(changed))))
            assert forged.status_code == 403
