"""The examples a newcomer copies, run as written against a real `agentctl dev up`: the
README's approvals from any client (its survey task from `agentctl start`, approved by the
plain-client snippet, the `temporal` CLI or the gateway over HTTP); the web page's suggested
first task through the gateway; every block of docs/devices.md, on a device of its own. Each
ends with a report written (dev up seeds new sessions with the demo's files,
AGENT_WORKSPACE_SEED), not with "no text files" and nothing to approve."""

from __future__ import annotations

import ast
import html.parser
import re
import subprocess
from pathlib import Path

from temporalio.client import Client

from tests.support.dev_up import (  # noqa: F401 (the `up` fixture)
    TASK_SECONDS,
    Up,
    agentctl,
    dev_up_stack,
    gateway_call,
    wait_status,
    with_venv,
)
from tests.support.doc_blocks import doc_block
from tests.support.doc_runs import (
    VENV_PATH,
    assigned,
    at_stack,
    in_background,
    interrupt,
    lines,
    sh,
)
from tests.test_devup_stop import base_env, wait_for

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "workers" / "gateway" / "web" / "index.html"
SEED_FILES = ("README.md", "readings.csv", "2026-11-24-standup.md", "summary.py")


def assert_report(root: Path, files: tuple[str, ...]) -> None:
    report = (root / "out" / "report.md").read_text()
    missing = [name for name in files if name not in report]
    assert not missing, report


def readme_start(up: Up) -> str:
    """The README's `S=$(agentctl start ...)`, run as written: its session, once it waits
    for the report's approval."""
    block = doc_block("README.md", "S=$(.venv/bin/agentctl start").text
    session = assigned(up, lines(block, "S=$("))
    wait_status(up, session, "waiting_approval", "call_2_0")
    return session


async def test_readme_survey_task_is_approved_by_the_plain_client_snippet(up: Up) -> None:
    block = doc_block("README.md", "S=$(.venv/bin/agentctl start").text
    # Its approve line is cli.md's, run as written by tests/test_docs_commands.py.
    assert block in doc_block("docs/cli.md", "S=$(.venv/bin/agentctl start").text
    session = readme_start(up)
    shown = sh(up, lines(block, ".venv/bin/agentctl status"), S=session)
    assert "waiting for approval: call_2_0 write_file({'path': 'out/report.md'" in shown
    snippet = doc_block("README.md", "from durable_agents import ApproveInput").text
    client = await Client.connect(
        up.env["TEMPORAL_ADDRESS"], namespace=up.env.get("TEMPORAL_NAMESPACE", "default")
    )
    code = compile(snippet, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    pending = eval(code, {"client": client, "sid": session})
    if pending is not None:
        await pending
    wait_status(up, session, "completed")
    assert_report(up.project / "workspace" / "default" / session, SEED_FILES)


class _FirstTask(html.parser.HTMLParser):
    """The text the page's start form holds when it opens."""

    inside = False
    found = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.inside = tag == "textarea" and ("id", "start-text") in attrs

    def handle_endtag(self, tag: str) -> None:
        self.inside = False

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.found += data


def test_the_web_pages_first_task_ends_with_a_report(up: Up) -> None:
    parser = _FirstTask()
    parser.feed(PAGE.read_text())
    assert parser.found.strip(), "the page suggests no first task"
    key = agentctl(
        up, "keys", "create", "--tenant", "default", "--user", "ann",
        "--scope", "read", "--scope", "start", "--scope", "approve",
    ).splitlines()[0]  # fmt: skip
    started = gateway_call(
        up.gateway, key, "POST", "/v1/sessions", {"text": parser.found, "agent": "default"}
    )
    session = started["session_id"]
    wait_status(up, session, "waiting_approval", "call_2_0")
    gateway_call(up.gateway, key, "POST", f"/v1/sessions/{session}/calls/call_2_0/approve", {})
    wait_status(up, session, "completed")
    assert_report(up.project / "workspace" / "default" / session, SEED_FILES)


def device_online(up: Up, device: str) -> bool:
    """`agentctl devices` lists the device as online."""
    rows = agentctl(up, "devices").splitlines()
    return any(f" {device} " in row and row.rstrip(" │").endswith("yes") for row in rows)


def test_the_device_demo_runs_as_written_and_revoking_its_key_cuts_it_off(
    up: Up, tmp_path: Path
) -> None:
    """docs/devices.md, block by block: a device key; the laptop serving its own folder with
    that key and the gateway's URL only; a task whose tools run there, approved by the call
    id status shows; the key revoked, after which the device is refused and exits."""
    key = assigned(up, doc_block("docs/devices.md", "DK=$(").text.strip())
    assert re.fullmatch(r"da_[0-9a-f]{16}_\S+", key), key
    home = with_venv(tmp_path / "home")  # the laptop's ~: no stack settings, no stack record
    laptop_env = base_env(home) | {"HOME": str(home), "XDG_STATE_HOME": str(home), "DK": key}
    laptop = doc_block("docs/devices.md", "export AGENT_GATEWAY_URL=").text
    device = in_background(at_stack(laptop, up), laptop_env, home, tmp_path / "device.log")
    try:
        wait_for("the device", lambda: device_online(up, "laptop"), TASK_SECONDS, device)
        task = doc_block("docs/devices.md", "S=$(.venv/bin/agentctl start --device").text
        session = assigned(up, lines(task, "S=$("))
        wait_status(up, session, "waiting for approval", "write_file")
        approved = sh(up, lines(task, "C=$(", ".venv/bin/agentctl approve"), S=session)
        assert re.fullmatch(r"approved call_\d+_0\n", approved), approved
        wait_status(up, session, "completed")

        revoke = doc_block("docs/devices.md", ".venv/bin/agentctl keys revoke").text
        assert sh(up, revoke, DK=key) == f"revoked {key.split('_')[1]}\n"
        try:  # cut off at once: its long-poll is ended and the gateway refuses the key
            assert device.wait(30) == 1
        except subprocess.TimeoutExpired:
            raise AssertionError("the device still runs 30 s after its key was revoked") from None
        log = (tmp_path / "device.log").read_text()
        assert "the gateway refused this key" in log, log
    finally:
        interrupt(device)
    project = home / "project"
    assert (project / "notes.txt").read_text() == "Ship the release on Friday.\n"
    assert_report(project, ("notes.txt",))


def test_readme_temporal_cli_approval_runs_as_written(up: Up) -> None:
    session = readme_start(up)
    cli = doc_block("README.md", "temporal workflow update execute").text
    assert "approved:true" in sh(up, cli, S=session, PATH=VENV_PATH)
    wait_status(up, session, "completed")
    assert_report(up.project / "workspace" / "default" / session, SEED_FILES)


def test_readme_http_approval_with_edited_arguments_runs_as_written(up: Up) -> None:
    session = readme_start(up)
    http = doc_block("README.md", "K=da_...").text
    key = agentctl(
        up, "keys", "create", "--tenant", "default", "--user", "ann",
        "--scope", "read", "--scope", "approve",
    ).splitlines()[0]  # fmt: skip
    inbox = sh(up, at_stack(http.replace("K=da_...", f"K={key}"), up), S=session)
    assert "call_2_0" in inbox.splitlines()[0]  # the inbox listed the waiting call
    wait_status(up, session, "completed")
    root = up.project / "workspace" / "default" / session
    assert (root / "out" / "x.md").read_text() == "..."  # the edited arguments ran
