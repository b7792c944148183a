"""The web page in a real browser (Debian's chromium, driven by Playwright) against the real
gateway over HTTP, a real cloud worker running the offline model, and the real stack: sign
in, start a task, approve from the inbox (refused edits named by the page and by the
server, then edited arguments), see completion, open an artifact, send a follow-up and
reject with a reason; start a task with a budget, see it stop there (no raise offered to a
read-only key), raise it and see it finish, with the session's and the tenant's usage the
API's figures. Untrusted text with markup in it stays text and runs nothing.
Screenshots of each stage go to $WEB_SCREENSHOTS (default .artifacts/screenshots/)."""

from __future__ import annotations

import hashlib
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, BrowserContext, Locator, Page, expect
from temporalio.client import Client

from durable_agents.activities.providers.offline import OfflineProvider
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.browser import chromium
from tests.support.gateway import bearer, gateway_server, make_key
from tests.support.helpers import tenant_root

# The offline model streams each reply in pieces this far apart, so the page can be seen
# showing a reply's tokens (delta events) before its item commits.
PIECE_SECONDS = 0.25

SCREENSHOTS = Path(
    os.environ.get("WEB_SCREENSHOTS", Path(__file__).parents[1] / ".artifacts" / "screenshots")
)
WAIT_MS = 60_000
# Markup in untrusted text: each would set window.__xss if the page ever parsed it as HTML.
IMG_PROBE = "<img src=x onerror=\"window.__xss='img'\">"
SCRIPT_PROBE = "<script>window.__xss='script'</script>"
NOTES = f"# Notes {IMG_PROBE}\n{SCRIPT_PROBE}\nSome notes to survey.\n".encode()

# Records the partial text each step showed while it streamed (the element is replaced by
# the committed item, so a later look would miss it).
RECORD_PARTIALS = """
window.__partials = {};
new MutationObserver(() => {
  for (const node of document.querySelectorAll('[data-testid="partial"]')) {
    window.__partials[node.dataset.step] = node.querySelector(".text").textContent;
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
# The committed assistant text of each step of the session shown, by step.
COMMITTED_REPLIES = """
Object.fromEntries([...document.querySelectorAll('[data-kind="assistant_message"]')].map(
  (node) => [node.dataset.step, node.querySelector(".text").textContent]))
"""


class Shots:
    """Numbered full-page screenshots, remembered so the test can check they were written."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.paths = directory, list[Path]()

    async def take(self, page: Page, stage: str) -> None:
        path = self.directory / f"{len(self.paths) + 1:02d}-{stage}.png"
        await page.screenshot(path=path, full_page=True)
        self.paths.append(path)


def _entry(page: Page, tool: str) -> Locator:
    return page.locator(f'[data-testid="inbox-entry"][data-tool="{tool}"]')


async def _open(entry: Locator) -> None:
    """Open an inbox entry (a compact line until then) to its arguments and decision."""
    await expect(entry).to_be_visible(timeout=WAIT_MS)
    await entry.get_by_test_id("inbox-summary").click()


async def _no_markup_ran(page: Page) -> None:
    assert await page.evaluate("window.__xss") is None
    # Parsed markup would leave elements behind even where the CSP stopped its script.
    assert await page.locator("main img, main script").count() == 0


async def _sign_in(page: Page, key: str) -> None:
    await page.fill("#key", key)
    await page.click("#signin-form button[type=submit]")


async def _start(page: Page, text: str, approve: str) -> None:
    await page.fill("#start-text", text)
    await page.fill("#start-approve", approve)
    await page.click("#start-form button[type=submit]")


async def test_web_page_signs_in_starts_approves_edits_rejects_and_opens_an_artifact(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    root = tenant_root(workspace, tenant)
    (root / "notes.md").write_bytes(NOTES)
    key = await make_key(resources, tenant, "read", "start", "approve", user="ann")
    reader = await make_key(resources, tenant, "read", user="rob")
    shots = Shots(SCREENSHOTS)
    async with (
        agent_worker(OfflineProvider(PIECE_SECONDS), workspace, workspace_scope="tenant") as queue,
        gateway_server(migrated, resources, client, queue=queue, workspace=workspace) as base,
        chromium() as browser,
    ):
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        await context.add_init_script(RECORD_PARTIALS)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))

        answer = await page.goto(base)
        assert answer is not None and answer.status == 200
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert answer.headers["x-content-type-options"] == "nosniff"

        # A bad key is refused with a clear message; the right one signs in.
        await _sign_in(page, "da_nope_wrong")
        await expect(page.get_by_test_id("signin-error")).to_contain_text("not accepted")
        await expect(page.locator("#app")).to_be_hidden()
        await shots.take(page, "sign-in-refused")
        await _sign_in(page, key)
        await expect(page.get_by_test_id("whoami")).to_have_text(f"ann @ {tenant}")
        assert await page.evaluate("sessionStorage.length") == 1
        await shots.take(page, "signed-in")

        await _start(page, f"Survey the notes {IMG_PROBE}", "read_file, write_file")
        await expect(page.get_by_test_id("partial").first).to_be_visible(timeout=WAIT_MS)
        await shots.take(page, "tokens-streaming")
        await _approve_with_refused_and_edited_arguments(page, shots)
        await expect(page.get_by_test_id("status")).to_have_attribute(
            "data-status", "completed", timeout=WAIT_MS
        )
        timeline = page.get_by_test_id("timeline")
        await expect(timeline).to_contain_text(IMG_PROBE)  # the task and the file, as text
        await expect(timeline).to_contain_text(SCRIPT_PROBE)
        await expect(page.get_by_test_id("session-title")).to_contain_text(IMG_PROBE)
        await _no_markup_ran(page)
        await shots.take(page, "completed")
        partials = await page.evaluate("window.__partials")
        committed = await page.evaluate(COMMITTED_REPLIES)

        artifact = await _open_read_result(page, context, shots)

        await _follow_up_and_reject(page, shots)
        await _no_markup_ran(page)
        await _stop_at_budget_raise_and_read_usage(page, browser, base, key, reader, shots)

        await page.click("#signout")  # the key leaves the tab with the signed-in view
        await expect(page.locator("#app")).to_be_hidden()
        await expect(page.locator("#signin")).to_be_visible()
        assert await page.evaluate("sessionStorage.length") == 0
        await context.close()

    assert (root / "out" / "report.md").read_text() == "edited in the browser"
    assert artifact == NOTES and hashlib.sha256(artifact).hexdigest()
    assert errors == []
    # Tokens arrived before their items committed: each step's streamed text was a run of
    # the reply the step committed (a page that joins mid-reply misses the pieces before).
    assert partials, "no partial reply text was shown while the model streamed"
    for step, text in partials.items():
        assert text and text in committed[step], (step, text, committed.get(step))
    assert len(shots.paths) == 14
    for path in shots.paths:
        assert path.stat().st_size > 1000, path


async def _approve_with_refused_and_edited_arguments(page: Page, shots: Shots) -> None:
    entry = _entry(page, "read_file")
    await expect(entry).to_be_visible(timeout=WAIT_MS)
    await shots.take(page, "inbox")
    await _open(entry)
    await entry.get_by_test_id("edit").click()
    editor, error = entry.get_by_test_id("edit-arguments"), entry.get_by_test_id("decision-error")
    # The page's own check names the field...
    await editor.fill('{"path": 7}')
    await entry.get_by_test_id("approve-edited").click()
    await expect(error).to_have_text("'path' must be of type string")
    await shots.take(page, "edit-refused-by-page")
    # ...and what only the server's full schema check finds comes back from it, named.
    await editor.fill('{"path": "notes.md", "max_bytes": 0}')
    await entry.get_by_test_id("approve-edited").click()
    await expect(error).to_contain_text("'max_bytes'")
    await expect(error).to_contain_text("minimum 1")
    await shots.take(page, "edit-refused-by-server")
    await entry.get_by_test_id("approve").click()

    write = _entry(page, "write_file")
    await expect(write).to_be_visible(timeout=WAIT_MS)
    await expect(write.get_by_test_id("pending-arguments")).to_contain_text("out/report.md")
    # The report is one long JSON line: it wraps, the page does not grow sideways.
    await _open(write)
    assert await page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    await write.get_by_test_id("edit").click()
    await write.get_by_test_id("edit-arguments").fill(
        '{"path": "out/report.md", "content": "edited in the browser"}'
    )
    await shots.take(page, "approve-edited")
    await write.get_by_test_id("approve-edited").click()


async def _open_read_result(page: Page, context: BrowserContext, shots: Shots) -> bytes:
    result = page.locator('[data-testid="item"][data-kind="tool_result"]').filter(
        has_text="read_file"
    )
    async with context.expect_page() as opened:
        await result.get_by_test_id("open-artifact").click()
    tab = await opened.value
    await tab.wait_for_load_state()
    await shots.take(tab, "artifact")
    body = await (await context.request.get(tab.url)).body()
    await tab.close()
    return body


async def _follow_up_and_reject(page: Page, shots: Shots) -> None:
    await _start(page, "Survey the notes once more", "write_file")
    write = _entry(page, "write_file")
    await expect(write).to_be_visible(timeout=WAIT_MS)
    await page.fill("#followup-text", "also say hi")
    await page.click("#followup-form button[type=submit]")
    timeline = page.get_by_test_id("timeline")
    await expect(
        timeline.locator('[data-kind="user_message"]').filter(has_text="also say hi")
    ).to_be_visible(timeout=WAIT_MS)
    await _open(write)
    await write.get_by_test_id("reject").click()
    await write.get_by_test_id("reject-reason").fill(f"not now {IMG_PROBE}")
    await shots.take(page, "follow-up-and-reject")
    await write.get_by_test_id("reject-confirm").click()
    await expect(page.get_by_test_id("status")).to_have_attribute(
        "data-status", "completed", timeout=WAIT_MS
    )
    # The model's reply quotes the reason: markup from a model reply, shown as text.
    reply = timeline.locator('[data-kind="assistant_message"]').filter(
        has_text="I did not write the report"
    )
    await expect(reply).to_contain_text(IMG_PROBE)
    await expect(timeline).to_contain_text("✕ ann rejected write_file")
    await shots.take(page, "rejected")


async def _usage(page: Page, base: str, key: str, query: str) -> dict[str, Any]:
    answer = await page.context.request.get(f"{base}/v1/usage?{query}", headers=bearer(key))
    assert answer.ok
    total: dict[str, Any] = (await answer.json())["total"]
    return total


async def _stop_at_budget_raise_and_read_usage(
    page: Page, browser: Browser, base: str, key: str, reader: str, shots: Shots
) -> None:
    # One tool call allowed: the model's first reply calls recall, and the check before the
    # second model call stops the task there.
    await page.fill("#start-text", "recall query=notes")
    await page.fill("#start-approve", "")
    await page.click("#start-budget summary")
    await page.fill("#start-budget-tool-calls", "1")
    await page.click("#start-form button[type=submit]")
    status = page.get_by_test_id("status")
    await expect(status).to_have_attribute("data-status", "budget_exhausted", timeout=WAIT_MS)
    await expect(status).to_have_text("Budget reached")
    await expect(page.locator("#session-detail")).to_contain_text("tool_calls 1 of 1")
    usage = page.get_by_test_id("session-usage")
    await expect(usage).to_have_attribute("data-session", re.compile(r"^[0-9a-f-]{36}$"))
    session_id = await usage.get_attribute("data-session") or ""
    entry = page.locator(f'[data-testid="budget-entry"][data-session="{session_id}"]')
    await expect(entry).to_contain_text("tool_calls 1 of 1", timeout=WAIT_MS)

    # The session's usage is the API's figures for it (one reply so far).
    spent = await _usage(page, base, key, f"session={session_id}")
    assert spent["replies"] == 1 and spent["input_tokens"] > 0
    await expect(usage).to_have_attribute("data-input-tokens", str(spent["input_tokens"]))
    await expect(usage).to_have_attribute("data-output-tokens", str(spent["output_tokens"]))
    await expect(usage).to_contain_text(f"{spent['output_tokens']} out over 1 model reply")

    # A key that may only read sees the stop, but no raise.
    readonly = await browser.new_context(viewport={"width": 1280, "height": 900})
    other = await readonly.new_page()
    await other.goto(base)
    await _sign_in(other, reader)
    await other.locator(f'[data-testid="session-row"][data-session="{session_id}"]').click()
    await expect(other.get_by_test_id("status")).to_have_attribute(
        "data-status", "budget_exhausted", timeout=WAIT_MS
    )
    await expect(
        other.locator(f'[data-testid="budget-entry"][data-session="{session_id}"]')
    ).to_be_visible(timeout=WAIT_MS)
    assert await other.locator('[data-testid="raise-budget"]:visible').count() == 0
    await expect(other.get_by_test_id("raise-who")).to_be_visible()
    assert await page.locator('[data-testid="raise-budget"]:visible').count() == 2  # card, inbox
    await shots.take(other, "budget-read-only")
    await readonly.close()

    # The approver raises it, offered twice the limit it reached; the task goes on.
    await page.locator("#session-raise").click()
    form = page.locator("#session-raise-form")
    await expect(form.get_by_test_id("raise-tool_calls")).to_have_value("2")
    await shots.take(page, "budget-raise")
    await form.get_by_test_id("raise-budget-confirm").click()
    await expect(status).to_have_attribute("data-status", "completed", timeout=WAIT_MS)
    timeline = page.get_by_test_id("timeline")
    await expect(timeline.locator('[data-kind="error"]')).to_contain_text("Stopped at its budget")
    raise_item = timeline.locator('[data-kind="approval"]').filter(has_text="raised the budget")
    await expect(raise_item).to_contain_text("↑ ann raised the budget")
    await expect(raise_item).to_contain_text("New budget: tool calls 2")
    await expect(timeline.locator('[data-kind="assistant_message"]').last).to_contain_text(
        "recall:"
    )
    await expect(entry).to_have_count(0, timeout=WAIT_MS)
    assert await page.locator("#session-raise").is_hidden()
    # Two replies now, none repeated; the tenant's day is the API's total for today.
    await expect(usage).to_contain_text("over 2 model replies", timeout=WAIT_MS)
    today = await _usage(page, base, key, f"day={datetime.now(UTC).date()}")
    assert today["replies"] >= 2
    day = page.get_by_test_id("usage-today")
    await expect(day).to_have_attribute("data-replies", str(today["replies"]), timeout=WAIT_MS)
    await expect(day).to_have_attribute("data-input-tokens", str(today["input_tokens"]))
    await expect(day.get_by_test_id("usage-out")).to_have_text(f"{today['output_tokens']:,}")
    await shots.take(page, "budget-raised-and-usage")
