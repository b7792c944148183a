"""The page's session view in a real browser against the real gateway: the sub-agent tree,
and token deltas rendered per the shared contract, with only the session's event stream
answered by the test (no provider streams
deltas on this branch yet; test_web_page.EXPECT_TOKEN_DELTAS turns on the end-to-end check
once one does). Per step the partial text of the highest (attempt, send) is shown, a lower
one's dropped when a higher one starts; the committed assistant item replaces it; the
page resumes a dropped stream with Last-Event-ID, and deltas do not move that cursor."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from playwright.async_api import Request, Route, expect
from temporalio.client import Client

from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.browser import chromium, sign_in
from tests.support.gateway import gateway_server, make_key


def _event(kind: str, data: dict[str, Any], event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data)}\n\n"


def _item(sid: uuid.UUID, ordinal: int, kind: str, text: str, **data: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "ordinal": ordinal,
        "kind": kind,
        "role": "assistant" if kind == "assistant_message" else "user",
        "text": text,
        "tool_call_id": None,
        "tool_name": None,
        "data": data,
        "artifact_id": None,
        "created_at": "2026-01-01T00:00:00Z",
    }


def _delta(attempt: int, seq: int, text: str, send: int = 0) -> str:
    return _event("delta", {"step": 0, "attempt": attempt, "send": send, "seq": seq, "text": text})


async def test_page_shows_the_partial_reply_of_the_latest_attempt_until_the_item_commits(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Any
) -> None:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="streaming", model_config={})
    key = await make_key(resources, tenant, "read", user="ann")
    first = "".join(
        [
            _event("item", _item(sid, 1, "user_message", "say hello"), 1),
            _event("status", {"status": "running", "detail": ""}),
            _delta(1, 0, "Hel"),
            _delta(1, 1, "lo <b>there</b>"),
            _delta(2, 0, "Good"),  # attempt 1 was retried: its text goes
            _delta(1, 2, " STALE"),  # late text of the retried attempt: ignored
            _delta(2, 1, "bye <img src=x>"),
            _delta(2, 1, "bye <img src=x>"),  # a repeated seq: shown once
        ]
    )
    second = "".join(
        [
            _event("item", _item(sid, 2, "assistant_message", "Goodbye, committed.", step=0), 2),
            _event("status", {"status": "completed", "detail": ""}),
            _event("end", {"status": "completed"}),
        ]
    )
    resumed_from: list[str | None] = []
    release = asyncio.Event()

    async def stream(route: Route, request: Request) -> None:
        if not resumed_from and "last-event-id" not in await request.all_headers():
            resumed_from.append(None)
            await route.fulfill(headers={"content-type": "text/event-stream"}, body=first)
            return  # the stream "drops" here: the page reconnects
        resumed_from.append((await request.all_headers()).get("last-event-id"))
        await release.wait()
        await route.fulfill(headers={"content-type": "text/event-stream"}, body=second)

    async with (
        gateway_server(migrated, resources, client, queue="unused", workspace=tmp_path) as base,
        chromium() as browser,
    ):
        page = await browser.new_page()
        await page.route(f"**/v1/sessions/{sid}/events", stream)
        await sign_in(page, base, key)
        await page.locator(f'[data-testid="session-row"][data-session="{sid}"]').click()

        partial = page.get_by_test_id("partial")
        await expect(partial).to_have_count(1)
        await expect(partial).to_have_attribute("data-attempt", "2")
        await expect(partial.locator(".text")).to_have_text("Goodbye <img src=x>")
        assert await page.locator("main img, main b").count() == 0
        release.set()

        await expect(page.get_by_test_id("status")).to_have_attribute("data-status", "completed")
        await expect(partial).to_have_count(0)
        items = page.locator('[data-testid="item"]')
        await expect(items).to_have_count(2)
        await expect(items.nth(1)).to_contain_text("Goodbye, committed.")
        await expect(page.get_by_test_id("stream-state")).to_have_attribute("data-state", "ended")
        await page.close()
    # The reconnect asked for what came after the last committed item, not after a delta.
    assert resumed_from == [None, "1"]


async def test_page_shows_the_sub_agent_tree_and_opens_a_child_from_it(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Any
) -> None:
    root, child, grandchild = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    titles = {root: "the root task", child: "a sub-agent <i>x</i>", grandchild: "its own helper"}
    for sid, parent in ((root, None), (child, root), (grandchild, child)):
        async with resources.sessions() as db, db.begin():
            await SessionRepository(db, tenant).create(
                sid, title=titles[sid], model_config={}, parent_id=parent
            )
    key = await make_key(resources, tenant, "read", user="ann")
    async with (
        gateway_server(migrated, resources, client, queue="unused", workspace=tmp_path) as base,
        chromium() as browser,
    ):
        page = await browser.new_page()
        await sign_in(page, base, key)
        await page.locator(f'[data-testid="session-row"][data-session="{grandchild}"]').click()
        tree = page.get_by_test_id("tree")
        nodes = tree.locator('[data-testid="tree-node"]')
        await expect(nodes).to_have_count(3)
        # Nested as parent and children: the grandchild's node sits inside the child's.
        child_node = tree.locator(f'[data-testid="tree-node"][data-session="{child}"]')
        await expect(
            child_node.locator(f'[data-testid="tree-node"][data-session="{grandchild}"]')
        ).to_have_count(1)
        await expect(child_node).to_contain_text("a sub-agent <i>x</i>")
        assert await page.locator("main i").count() == 0
        await tree.locator(f'[data-session="{root}"] > a').click()
        await expect(page.get_by_test_id("session-title")).to_have_text("the root task")
        await page.close()


async def test_a_key_revoked_while_signed_in_returns_the_page_to_sign_in_saying_so(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Any
) -> None:
    key = await make_key(resources, tenant, "read", user="ann")
    async with (
        gateway_server(migrated, resources, client, queue="unused", workspace=tmp_path) as base,
        chromium() as browser,
    ):
        page = await browser.new_page()
        await sign_in(page, base, key)
        await expect(page.get_by_test_id("whoami")).to_have_text(f"ann @ {tenant}")
        async with resources.sessions() as db, db.begin():
            assert await ApiKeyRepository(db).revoke(key.split("_")[1])
        # The next refresh (every few seconds) is refused: the page signs out, saying why.
        await expect(page.get_by_test_id("signin-error")).to_contain_text("no longer accepted")
        await expect(page.locator("#app")).to_be_hidden()
        assert await page.evaluate("sessionStorage.length") == 0
        await page.close()
