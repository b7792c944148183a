"""Forking from the page, in a real browser (Debian's chromium, driven by Playwright) against
the real gateway, a real cloud worker and the real stack: a key that may start tasks sees
"Fork here" on each step of the timeline, forks a step with an instruction and lands on the
new session, which shows the steps it shares with its parent and then its own; the parent
is not changed. A read-only key sees no such control. Markup in the instruction stays text.
Screenshots go to $WEB_SCREENSHOTS (default .artifacts/screenshots/)."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from playwright.async_api import Page, expect
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.browser import chromium, sign_in
from tests.support.gateway import gateway_server, make_key
from tests.support.helpers import start, tenant_root
from tests.test_fork_lineage import rows_of

SCREENSHOTS = Path(
    os.environ.get("WEB_SCREENSHOTS", Path(__file__).parents[1] / ".artifacts" / "screenshots")
)
WAIT_MS = 60_000
PROBE = "<img src=x onerror=\"window.__xss='img'\">"
SCRIPT = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.md"}}]},
    {"text": "The notes are short."},
]


async def _sign_in_and_open(page: Page, base: str, key: str, session: str) -> None:
    await sign_in(page, base, key)
    await page.locator(f'[data-testid="session-row"][data-session="{session}"]').click()
    await expect(page.get_by_test_id("status")).to_have_attribute(
        "data-status", "completed", timeout=WAIT_MS
    )
    replies = page.locator('[data-testid="item"][data-kind="assistant_message"]')
    await expect(replies).to_have_count(2, timeout=WAIT_MS)


async def test_a_step_forks_from_the_page_into_a_session_showing_what_it_shares(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    (tenant_root(workspace, tenant) / "notes.md").write_text("# notes\nshort ones\n")
    key = await make_key(resources, tenant, "read", "start", user="ann")
    reader = await make_key(resources, tenant, "read", user="rob")
    model = ScriptedProvider.from_data(SCRIPT)
    async with (
        agent_worker(model, workspace, workspace_scope="tenant") as queue,
        gateway_server(migrated, resources, client, queue=queue, workspace=workspace) as base,
        chromium() as browser,
    ):
        parent, handle = await start(client, resources, queue, "Read the notes.", tenant=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
        before = await rows_of(resources, tenant, uuid.UUID(parent))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (once, before a shot)

        # A read-only key reads the timeline, with nothing to fork it by.
        readonly = await browser.new_context(viewport={"width": 1280, "height": 900})
        other = await readonly.new_page()
        await _sign_in_and_open(other, base, reader, parent)
        assert await other.get_by_test_id("fork-here").count() == 0
        await readonly.close()

        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        await _sign_in_and_open(page, base, key, parent)
        forks = page.get_by_test_id("fork-here")
        await expect(forks).to_have_count(2)  # one per step
        step = page.locator('[data-testid="item"][data-kind="assistant_message"][data-step="1"]')
        await step.get_by_test_id("fork-here").click()
        form = step.get_by_test_id("fork-form")
        await expect(form).to_be_visible()
        await form.get_by_test_id("fork-instruction").fill(f"Say it as a list {PROBE}")
        await page.screenshot(path=SCREENSHOTS / "fork-here.png", full_page=True)
        await form.get_by_test_id("fork-confirm").click()

        # The page opens the fork: its parent named, the shared steps, then its own.
        await expect(page.get_by_test_id("forked-from")).to_have_text(parent[:8], timeout=WAIT_MS)
        await expect(page.get_by_test_id("status")).to_have_attribute(
            "data-status", "completed", timeout=WAIT_MS
        )
        usage = page.get_by_test_id("session-usage")
        fork = await usage.get_attribute("data-session") or ""
        assert fork not in ("", parent)
        timeline = page.get_by_test_id("timeline")
        instruction = timeline.locator('[data-kind="user_message"]').last
        await expect(instruction).to_contain_text(f"Say it as a list {PROBE}")
        await expect(timeline.locator('[data-kind="assistant_message"]')).to_have_count(
            2, timeout=WAIT_MS
        )
        await page.screenshot(path=SCREENSHOTS / "fork-opened.png", full_page=True)
        shown = await timeline.locator('[data-testid="item"]').evaluate_all(
            "(nodes) => nodes.map((n) => [n.dataset.kind, n.dataset.step ?? null])"
        )
        assert await page.evaluate("window.__xss") is None
        assert await page.locator("main img, main script").count() == 0
        await context.close()

    assert errors == []
    _, theirs = await tasks.read_session(resources.sessions, tenant, parent)
    row, items = await tasks.read_session(resources.sessions, tenant, fork)
    assert row.forked_from == uuid.UUID(parent)
    shared = [i for i in theirs if row.forked_at is not None and i.ordinal <= row.forked_at]
    assert [i.id for i in items[: len(shared)]] == [i.id for i in shared]
    kinds = [ItemKind.USER_MESSAGE, ItemKind.ASSISTANT_MESSAGE, ItemKind.TOOL_CALL]
    assert [i.kind for i in shared] == [*kinds, ItemKind.TOOL_RESULT]
    # The page showed each of them, then the instruction and the fork's own step 1.
    assert shown == [
        ["user_message", None],
        ["assistant_message", "0"],
        ["tool_call", "0"],
        ["tool_result", "0"],
        ["user_message", None],
        ["assistant_message", "1"],
    ]
    assert await rows_of(resources, tenant, uuid.UUID(parent)) == before
