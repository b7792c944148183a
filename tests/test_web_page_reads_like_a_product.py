"""The web page as a new user reads it, in a real browser against the real gateway, worker
and stack: with a dozen calls waiting, the inbox is one compact line per call (tool, what
it would do, task, agent, session, how long it has waited) that opens to show the
arguments, so the session list stays in view; statuses and timeline items are in words,
not the API's names; a decision is one item worded as a decision; the start form offers
the agent's tools; a bad edit shows every problem at once. Screenshots go to
$WEB_SCREENSHOTS (default .artifacts/screenshots/)."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.async_api import Locator, Page, expect
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.browser import chromium, sign_in
from tests.support.gateway import bearer, gateway_http, gateway_server, make_key, poll
from tests.support.helpers import tenant_root

SCREENSHOTS = Path(
    os.environ.get("WEB_SCREENSHOTS", Path(__file__).parents[1] / ".artifacts" / "screenshots")
)
WAIT_MS = 60_000
PROBE = "<img src=x onerror=\"window.__xss='img'\">"
# Each task's first reply asks for three calls, each needing approval: 4 tasks, 12 waits.
THREE_CALLS = [
    {
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "notes.md"}},
            {"name": "list_dir", "arguments": {"path": ".", "recursive": True}},
            {"name": "write_file", "arguments": {"path": "out/summary.md", "content": PROBE}},
        ]
    }
]
TASKS = ["Tidy the notes", "Tidy the notes", f"Summarise the notes {PROBE}", "Index the folder"]
ASK = "read_file, list_dir"  # write_file asks already (the tool's own policy)
# API names a person should not have to read.
INTERNAL_NAMES = ["waiting_approval", "call_0_", "tool_result", "TOOL RESULT", "asks to"]


def _entries(page: Page) -> Locator:
    return page.get_by_test_id("inbox-entry")


async def _shot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (once, before a shot)
    path = SCREENSHOTS / f"product-{name}.png"
    await page.screenshot(path=path, full_page=True)
    return path


async def _no_internal_names(page: Page) -> None:
    shown = await page.locator("main").inner_text()
    for name in INTERNAL_NAMES:
        assert name not in shown, name


async def test_the_inbox_timeline_and_forms_read_in_words_and_show_every_edit_problem(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    (tenant_root(workspace, tenant) / "notes.md").write_text("# notes\n")
    key = await make_key(resources, tenant, "read", "start", "approve", user="ann")
    shots: list[Path] = []
    async with (
        agent_worker(
            ScriptedProvider.from_data(THREE_CALLS), workspace, workspace_scope="tenant"
        ) as queue,
        gateway_server(migrated, resources, client, queue=queue, workspace=workspace) as base,
        chromium() as browser,
    ):
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        await sign_in(page, base, key)

        # The start form offers the agent's tools; the one that always asks is ticked, fixed.
        tools = page.get_by_test_id("approve-tool")
        await expect(tools.first).to_be_visible()
        offered = await tools.evaluate_all("(boxes) => boxes.map((b) => b.dataset.tool)")
        assert {"read_file", "write_file", "list_dir", "fetch_url"} <= set(offered)
        write_box = page.locator('[data-testid="approve-tool"][data-tool="write_file"]')
        await expect(write_box).to_be_checked()
        await expect(write_box).to_be_disabled()
        for text in TASKS:
            for name in ASK.split(", "):
                box = page.locator(f'[data-testid="approve-tool"][data-tool="{name}"]')
                await box.check()
            await page.fill("#start-text", text)
            await page.click("#start-form button[type=submit]")
            await expect(page.locator("#start-text")).to_have_value("")

        entries = _entries(page)
        await expect(entries).to_have_count(12, timeout=WAIT_MS)
        await expect(page.get_by_test_id("inbox-count")).to_have_text("12")
        # Compact: a line per call, arguments hidden until opened; the sessions stay in view.
        for i in range(12):
            rect = await entries.nth(i).bounding_box()
            assert rect is not None and rect["height"] < 64, rect
        await expect(page.get_by_test_id("pending-arguments").first).to_be_hidden()
        sessions = await page.get_by_test_id("sessions").bounding_box()
        assert sessions is not None and sessions["y"] < 1300, sessions
        # Two identical tasks are told apart by their session; each line names its agent
        # and how long the call has waited.
        tidy = page.locator('[data-testid="inbox-entry"][data-tool="write_file"]').filter(
            has_text="Tidy the notes"
        )
        await expect(tidy).to_have_count(2)
        lines = await tidy.get_by_test_id("inbox-summary").all_inner_texts()
        assert lines[0] != lines[1], lines
        for line in lines:
            assert "default agent" in line and "session " in line, line
        await expect(tidy.first.get_by_test_id("waiting-for")).to_have_text("just now")
        await expect(page.locator('[data-testid="session-row"]').first).to_contain_text(
            "Needs approval"
        )
        await _no_internal_names(page)
        shots.append(await _shot(page, "inbox-many-waiting"))

        # A bad edit: every problem the page sees, at once; then what only the server sees.
        write = page.locator('[data-testid="inbox-entry"][data-tool="write_file"]').filter(
            has_text="Index the folder"
        )
        await write.get_by_test_id("inbox-summary").click()
        await expect(write.get_by_test_id("pending-arguments")).to_contain_text("<img src=x")
        await expect(write).to_contain_text("Step 1 of the task.")
        await write.get_by_test_id("edit").click()
        editor = write.get_by_test_id("edit-arguments")
        await editor.fill('{"path": 7, "mode": "append"}')
        await write.get_by_test_id("approve-edited").click()
        problems = write.get_by_test_id("decision-error").locator("li")
        await expect(problems).to_have_text(
            [
                "'content' is required",
                "'mode' is not an argument of this tool",
                "'path' must be of type string",
            ]
        )
        shots.append(await _shot(page, "approval-bad-edit-all-problems"))
        read = page.locator('[data-testid="inbox-entry"][data-tool="read_file"]').filter(
            has_text="Index the folder"
        )
        await read.get_by_test_id("inbox-summary").click()
        await read.get_by_test_id("edit").click()
        await read.get_by_test_id("edit-arguments").fill('{"path": "notes.md", "max_bytes": 0}')
        await read.get_by_test_id("approve-edited").click()
        await expect(read.get_by_test_id("decision-error").locator("li")).to_have_text(
            ["'max_bytes' does not satisfy minimum 1"]
        )
        await expect(write.get_by_test_id("edit-arguments")).to_have_value(
            '{"path": 7, "mode": "append"}'
        )  # a refresh meanwhile kept the edit being made

        # Decide all three calls of one task; its timeline shows one item per decision.
        await read.get_by_test_id("approve").click()
        await editor.fill('{"path": "out/summary.md", "content": "fixed"}')
        await write.get_by_test_id("approve-edited").click()
        listing = page.locator('[data-testid="inbox-entry"][data-tool="list_dir"]').filter(
            has_text="Index the folder"
        )
        await listing.get_by_test_id("inbox-summary").click()
        await listing.get_by_test_id("reject").click()
        await listing.get_by_test_id("reject-reason").fill(f"too broad {PROBE}")
        await listing.get_by_test_id("reject-confirm").click()
        await expect(entries).to_have_count(9, timeout=WAIT_MS)
        await (
            page.locator('[data-testid="session-row"]').filter(has_text="Index the folder").click()
        )
        await expect(page.get_by_test_id("status")).to_have_text("Done", timeout=WAIT_MS)
        decisions = page.locator('[data-testid="item"][data-kind="approval"]')
        await expect(decisions).to_have_count(3)
        words = await decisions.locator(".what").all_inner_texts()
        assert sorted(words) == [
            "✓ ann approved read_file",
            "✓ ann approved write_file with edited arguments",
            "✕ ann rejected list_dir",
        ], words
        rejected = decisions.filter(has_text="rejected")
        await expect(rejected).to_contain_text(f"Reason: too broad {PROBE}")
        # One item per decision: neither the request nor the rejected call's result repeats it.
        call = await rejected.get_attribute("data-call")
        about = page.locator(f'[data-testid="item"][data-call="{call}"]')
        await expect(about).to_have_count(2)  # the call and the decision
        await expect(page.get_by_test_id("timeline").locator(".who").first).to_contain_text("Task")
        await _no_internal_names(page)
        assert await page.evaluate("window.__xss") is None
        assert await page.locator("main img, main script").count() == 0
        shots.append(await _shot(page, "timeline-with-decisions"))
        await page.close()
    assert errors == []
    assert (tenant_root(workspace, tenant) / "out" / "summary.md").read_text() == "fixed"
    for path in shots:
        assert path.stat().st_size > 1000, path


async def test_agent_tools_are_listed_for_the_start_form_and_waiting_calls_carry_their_age(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    key = await make_key(resources, tenant, "read", "start", "approve", user="ann")
    write = [{"tool_calls": [THREE_CALLS[0]["tool_calls"][2]]}]
    async with (
        agent_worker(ScriptedProvider.from_data(write), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        tools = await http.get("/v1/agents/default/tools", headers=bearer(key))
        unknown = await http.get("/v1/agents/nobody/tools", headers=bearer(key))
        started = await http.post("/v1/sessions", json={"text": "w"}, headers=bearer(key))
        sid = started.json()["session_id"]
        inbox = await poll(
            lambda: http.get("/v1/approvals", headers=bearer(key)),
            lambda r: any(e["session"]["id"] == sid for e in r.json()["entries"]),
        )
        session = await http.get(f"/v1/sessions/{sid}", headers=bearer(key))
    assert tools.status_code == 200, tools.text
    listed = {t["name"]: t for t in tools.json()["tools"]}
    assert listed["write_file"]["approval"] == "always"
    assert listed["read_file"]["approval"] is None
    assert listed["read_file"]["description"].startswith("Read a file")
    assert unknown.status_code == 404
    [entry] = [e for e in inbox.json()["entries"] if e["session"]["id"] == sid]
    [call] = entry["pending"]
    [item] = [i for i in session.json()["items"] if i["kind"] == "tool_call"]
    assert call["waiting_since"] == item["created_at"]
