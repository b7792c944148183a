"""NUL bytes: PostgreSQL's text and jsonb refuse U+0000. A user's text with one is refused
at the door, naming the field (a 400, never a 500 with a traceback); a tool's output with
one is kept as bytes in its artifact and its item says it is binary, so the step commits at
the first attempt and no failure quotes the content."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.activities.policies.text_limits import InvalidText, check_json_text, check_text
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.fetch_policy import FetchAllowlist
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.previews import make_preview
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import gateway_server, make_device_key
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import items_of, start

PAGE = b"first line\x00secret-marker after the NUL\n"
WRITE = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "hi"}}]},
    {"text": "done"},
]


def test_the_text_rule_names_the_field_and_the_offset_never_the_text() -> None:
    with pytest.raises(InvalidText) as err:
        check_text("reason", "abc\x00secret")
    assert str(err.value) == "reason contains a NUL character (U+0000) at offset 3"
    with pytest.raises(InvalidText, match=r"arguments.path contains a NUL"):
        check_json_text("arguments", {"path": "a\x00b"})
    with pytest.raises(InvalidText, match="lone surrogate"):
        check_text("text", "a\ud800b")
    assert make_preview(PAGE, "text/plain") == f"[binary text/plain, {len(PAGE)} bytes]"


@pytest.fixture
async def nul_page() -> AsyncIterator[str]:
    async def page(_: web.Request) -> web.Response:
        return web.Response(body=PAGE, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/page", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/page"
    finally:
        await runner.cleanup()


async def test_a_fetched_page_with_a_nul_commits_at_once_as_bytes(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    nul_page: str,
) -> None:
    script = [{"tool_calls": [{"name": "fetch_url", "arguments": {"url": nul_page}}]}]
    provider = ScriptedProvider.from_data([*script, {"text": "done"}])
    allow = {"fetch_allow": FetchAllowlist.parse("127.0.0.1")}
    async with agent_worker(provider, workspace, agent_settings=allow) as queue:
        sid, handle = await start(client, resources, queue, tenant=tenant)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    items = await items_of(resources, tenant, sid)
    [fetched] = [i for i in items if i.kind == ItemKind.TOOL_RESULT]
    assert fetched.text == f"[binary text/plain, {len(PAGE)} bytes]"
    assert fetched.data["artifact"]["size_bytes"] == len(PAGE)
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert max(attempts) == 1
    assert "secret-marker" not in history.to_json()


async def test_a_nul_in_any_users_text_at_the_gateway_is_a_400_naming_the_field(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    key = await make_key(resources, tenant, "start", "approve", "read")
    async with (
        agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        start_nul = await http.post("/v1/sessions", json={"text": "a\x00b"}, headers=bearer(key))
        assert start_nul.status_code == 400
        assert "text contains a NUL" in start_nul.json()["error"]["message"]

        started = await http.post("/v1/sessions", json={"text": "write"}, headers=bearer(key))
        sid = started.json()["session_id"]
        inbox = await poll(
            lambda: http.get("/v1/approvals", headers=bearer(key)),
            lambda r: any(e["session"]["id"] == sid for e in r.json()["entries"]),
        )
        [entry] = [e for e in inbox.json()["entries"] if e["session"]["id"] == sid]
        call = entry["pending"][0]["tool_call_id"]
        before = len(await items_of(resources, tenant, sid))

        follow = await http.post(
            f"/v1/sessions/{sid}/messages", json={"text": "x\x00y"}, headers=bearer(key)
        )
        reject = await http.post(
            f"/v1/sessions/{sid}/calls/{call}/reject",
            json={"reason": "no\x00"},
            headers=bearer(key),
        )
        edited = await http.post(
            f"/v1/sessions/{sid}/calls/{call}/approve",
            json={"arguments": {"path": "x.txt", "content": "h\x00i"}},
            headers=bearer(key),
        )
        for answer, field in ((follow, "text"), (reject, "reason"), (edited, "arguments")):
            assert answer.status_code == 400, answer.text
            assert f"{field}" in answer.json()["error"]["message"]
            assert "NUL" in answer.json()["error"]["message"]
        # Nothing was committed for them; the call still waits and can be decided.
        assert len(await items_of(resources, tenant, sid)) == before
        ok = await http.post(
            f"/v1/sessions/{sid}/calls/{call}/approve", json={}, headers=bearer(key)
        )
        assert ok.status_code == 200, ok.text


async def test_a_device_result_with_a_nul_commits_as_bytes_not_a_500(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    auth = bearer(await make_device_key(resources, tenant, device_id))
    read = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "n.txt"}}]}]
    provider = ScriptedProvider.from_data([*read, {"text": "done"}])
    async with (
        agent_worker(provider, workspace) as queue,
        gateway_server(migrated, resources, client) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        registered = await http.post("/v1/device", json={"tools": ["read_file"]}, headers=auth)
        assert registered.status_code == 200, registered.text
        sid, handle = await start(
            client, resources, queue, tenant=tenant, device_id=device_id, device_tools=["read_file"]
        )
        offered = await http.post("/v1/device/calls/next", params={"wait": 20}, headers=auth)
        call = offered.json()
        assert (await http.put(call["upload"]["url"], content=PAGE)).status_code == 200
        claim = {
            "size_bytes": len(PAGE),
            "sha256": hashlib.sha256(PAGE).hexdigest(),
            "content_type": "text/plain",
        }
        done = await http.post(
            f"/v1/device/calls/{call['call_id']}/complete", json={"result": claim}, headers=auth
        )
        assert done.status_code == 200 and done.json()["status"] == "committed", done.text
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    [stored] = [i for i in await items_of(resources, tenant, sid) if i.kind == ItemKind.TOOL_RESULT]
    assert stored.text == f"[binary text/plain, {len(PAGE)} bytes]"
