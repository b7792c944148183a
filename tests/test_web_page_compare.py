"""Comparing from the page, in a real browser (Debian's chromium, driven by Playwright)
against the real gateway, a real cloud worker and the real stack: two sessions that read the
same first file and then another one each are ticked in the session list and compared; the
view shows how each ended and a row per step, marks the second session's step 2 as where it
parts from the first (other arguments: path), and opens a session from its column. Markup
in a final answer stays text. Screenshots go to $WEB_SCREENSHOTS (default
.artifacts/screenshots/)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from playwright.async_api import expect
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.browser import chromium, sign_in
from tests.support.gateway import gateway_server, make_key
from tests.support.helpers import start, tenant_root

SCREENSHOTS = Path(
    os.environ.get("WEB_SCREENSHOTS", Path(__file__).parents[1] / ".artifacts" / "screenshots")
)
WAIT_MS = 60_000
PROBE = "<img src=x onerror=\"window.__xss='img'\">"
FIRST = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "b.txt"}}]},
    {"text": "A and B are read."},
]
SECOND = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "c.txt"}}]},
    {"text": f"A and C are read. {PROBE}"},
]


async def test_two_sessions_ticked_in_the_list_compare_with_their_divergence_marked(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    for name in ("a", "b", "c"):
        (tenant_root(workspace, tenant) / f"{name}.txt").write_text(f"file {name}\n")
    key = await make_key(resources, tenant, "read", user="ann")
    model = ScriptedProvider.from_data(FIRST, by_task={"Read a and c": SECOND})
    async with (
        agent_worker(model, workspace, workspace_scope="tenant") as queue,
        gateway_server(migrated, resources, client, queue=queue, workspace=workspace) as base,
        chromium() as browser,
    ):
        ids = []
        for text in ("Read a and b.", "Read a and c."):
            sid, handle = await start(client, resources, queue, text, tenant=tenant)
            assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
            ids.append(sid)
        first, second = ids
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (once, before a shot)

        context = await browser.new_context(viewport={"width": 1400, "height": 1000})
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        await sign_in(page, base, key)
        button = page.get_by_test_id("compare-open")
        await expect(button).to_be_disabled(timeout=WAIT_MS)
        for sid in (first, second):
            pick = page.locator(f'[data-testid="compare-pick"][data-session="{sid}"]')
            await pick.check(timeout=WAIT_MS)
        # Ticking a session picks it; it does not open it.
        await expect(page.locator("#session")).to_be_hidden()
        await expect(button).to_have_text("Compare (2)")
        await button.click()

        view = page.get_by_test_id("compare")
        await expect(view).to_be_visible()
        summary = view.get_by_test_id("compare-summary")
        await expect(summary.get_by_test_id("compare-divergence")).to_contain_text(
            "step 2: other arguments (read_file: path)", timeout=WAIT_MS
        )
        await expect(summary.get_by_test_id("compare-status")).to_contain_text("Done")
        answers = summary.get_by_test_id("compare-answer")
        await expect(answers).to_contain_text(f"A and C are read. {PROBE}")
        steps = view.get_by_test_id("compare-step")
        await expect(steps).to_have_count(3)
        marked = view.locator('[data-testid="compare-cell"][data-diverged="true"]')
        await expect(marked).to_have_count(1)
        assert await marked.get_attribute("data-session") == second
        assert await marked.get_attribute("data-step") == "1"
        await expect(marked.get_by_test_id("diverged")).to_have_text(
            "Parts here: other arguments (read_file: path)"
        )
        await expect(marked).to_contain_text("read_file (other path) → ok, other result")
        same = view.locator(f'[data-testid="compare-cell"][data-session="{second}"][data-step="0"]')
        await expect(same).to_contain_text("read_file → ok, same result")
        await page.screenshot(path=SCREENSHOTS / "compare.png", full_page=True)
        assert await page.evaluate("window.__xss") is None
        assert await page.locator("main img, main script").count() == 0

        # A session's column opens it.
        await view.get_by_test_id("compare-open-session").nth(1).click()
        await expect(view).to_be_hidden()
        await expect(page.get_by_test_id("session-usage")).to_have_attribute(
            "data-session", second, timeout=WAIT_MS
        )
        await context.close()

    assert errors == []
