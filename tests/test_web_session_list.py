"""The page's session list in a real browser against the real gateway: it is refreshed every
few seconds, and a refresh keeps the rows it shows, changing only their words. A row rebuilt
between a click's press and its release takes no click: the browser gives the click to the
list, and the session the user pressed does not open."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from playwright.async_api import FloatRect, Locator, expect
from temporalio.client import Client

from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.browser import chromium, sign_in
from tests.support.gateway import gateway_server, make_key


async def _settled(target: Locator) -> FloatRect:
    """Where `target` is once the page's other parts have loaded and stopped moving it."""
    last = None
    while (box := await target.bounding_box()) != last or box is None:
        last = box
        await asyncio.sleep(0.3)
    return box


async def test_a_click_held_across_a_refresh_of_the_list_opens_the_session(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str, tmp_path: Path
) -> None:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="pressed", model_config={})
    key = await make_key(resources, tenant, "read", user="ann")
    async with (
        gateway_server(migrated, resources, client, queue="unused", workspace=tmp_path) as base,
        chromium() as browser,
    ):
        page = await browser.new_page()
        await sign_in(page, base, key)
        row = page.locator(f'[data-testid="session-row"][data-session="{sid}"]')
        await expect(row).to_have_attribute("data-status", SessionStatus.CREATED)
        shown = await row.element_handle()
        assert shown is not None
        await row.scroll_into_view_if_needed()
        box = await _settled(row.locator(".title"))

        # Pressed on the row; the session changes; the list's next refresh shows it.
        await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        await page.mouse.down()
        async with resources.sessions() as db, db.begin():
            await SessionRepository(db, tenant).set_status(sid, SessionStatus.RUNNING)
        await expect(row).to_have_attribute("data-status", SessionStatus.RUNNING)
        await page.mouse.up()

        await expect(page.get_by_test_id("session-title")).to_have_text("pressed")
        # The same row, its words changed in place.
        assert await shown.evaluate("node => node.isConnected")
        await expect(row.locator(".badge")).to_have_attribute("data-status", SessionStatus.RUNNING)
        # A completion says whether its check passed, in the same row.
        async with resources.sessions() as db, db.begin():
            await SessionRepository(db, tenant).set_status(
                sid, SessionStatus.COMPLETED, checked=True
            )
        await expect(row.locator(".badge")).to_contain_text("(checked)")
        assert await shown.evaluate("node => node.isConnected")
