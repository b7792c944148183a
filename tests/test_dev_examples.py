"""The examples a newcomer copies, run as written against a real `agentctl dev up`: the
README's survey task from `agentctl start`, approved by the README's plain-client snippet;
the web page's suggested first task through the gateway; the device demo of docs/devices.md
on a device of its own. Each ends with a report written (dev up seeds new sessions with the
demo's files, AGENT_WORKSPACE_SEED), not with "no text files" and nothing to approve."""

from __future__ import annotations

import ast
import contextlib
import html.parser
import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.test_devup_stop import (
    AGENTCTL,
    UP_TIMEOUT,
    base_env,
    dev_up,
    ended_within,
    processes_of,
    wait_for,
)

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DEVICES = REPO / "docs" / "devices.md"
PAGE = REPO / "workers" / "gateway" / "web" / "index.html"
SEED_FILES = ("README.md", "readings.csv", "2026-11-24-standup.md", "summary.py")
TASK_SECONDS = 90.0


@dataclass(frozen=True)
class Up:
    proc: subprocess.Popen[bytes]
    project: Path  # dev up's directory: its workspace is project/workspace
    env: dict[str, str]  # the stack's variables, as `agentctl env` prints them
    gateway: str


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("examples")
    project, state = root / "project", root / "stack"
    project.mkdir()
    env = base_env(project) | {"XDG_STATE_HOME": str(root / "state-home")}
    proc = dev_up(state, env, project)
    log = project / "dev-up.log"
    try:
        wait_for(
            "the worker",
            lambda: "cloud worker on" in log.read_text("utf-8", "replace"),
            UP_TIMEOUT,
            proc,
        )
        text = log.read_text()
        gateway = re.search(r"gateway: (http://\S+)", text)
        assert gateway is not None, text
        assert "new sessions start with the demo files (AGENT_WORKSPACE_SEED)" in text
        stack = dict(
            w.split("=", 1)
            for w in shlex.split((state / "env").read_text(), comments=True)
            if w != "export"
        )
        yield Up(proc, project, env | stack, gateway.group(1))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            ended_within(proc, 60)
        for pid in processes_of(state):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def agentctl(up: Up, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(AGENTCTL), *args],
        env=env or up.env,
        cwd=up.project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def section(path: Path, heading: str) -> str:
    text = path.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)


def command_line(block: str, starts: str) -> list[str]:
    """The block's line that starts with `starts`, as argv up to a pipe or the `)` of a
    `$(...)`, with agentctl the test's own."""
    line = next(line for line in block.splitlines() if line.startswith(starts))
    captured = re.match(r"\w+=\$\((.*)\)", line.split("#")[0].strip())
    argv = shlex.split(captured.group(1) if captured else line, comments=True)
    argv = argv[: argv.index("|")] if "|" in argv else argv
    return [str(AGENTCTL) if a == ".venv/bin/agentctl" else a for a in argv]


def wait_status(up: Up, session: str, wanted: str, *also: str) -> str:
    deadline = time.monotonic() + TASK_SECONDS
    while True:
        shown = agentctl(up, "status", session)
        if wanted in shown and all(a in shown for a in also):
            return shown
        ended = wanted != "completed" and "workflow: step" in shown and "status=completed" in shown
        assert not ended and time.monotonic() < deadline, agentctl(up, "show", session)
        time.sleep(0.5)


def assert_report(root: Path, files: tuple[str, ...]) -> None:
    report = (root / "out" / "report.md").read_text()
    missing = [name for name in files if name not in report]
    assert not missing, report


async def test_readme_survey_task_is_approved_by_the_plain_client_snippet(up: Up) -> None:
    approvals = section(README, "Approvals from any client")
    start = command_line(blocks(approvals, "sh")[0], "S=$(")
    assert start[1] == "start"
    session = agentctl(up, *start[1:]).strip()
    shown = wait_status(up, session, "waiting_approval", "call_2_0")
    assert "write_file" in shown
    snippet = next(b for b in blocks(approvals, "python") if "execute_update" in b)
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


def gateway_call(up: Up, key: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        up.gateway + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def test_the_web_pages_first_task_ends_with_a_report(up: Up) -> None:
    parser = _FirstTask()
    parser.feed(PAGE.read_text())
    assert parser.found.strip(), "the page suggests no first task"
    key = agentctl(
        up, "keys", "create", "--tenant", "default", "--user", "ann",
        "--scope", "read", "--scope", "start", "--scope", "approve",
    ).splitlines()[0]  # fmt: skip
    started = gateway_call(
        up, key, "POST", "/v1/sessions", {"text": parser.found, "agent": "default"}
    )
    session = started["session_id"]
    wait_status(up, session, "waiting_approval", "call_2_0")
    gateway_call(up, key, "POST", f"/v1/sessions/{session}/calls/call_2_0/approve", {})
    wait_status(up, session, "completed")
    assert_report(up.project / "workspace" / "default" / session, SEED_FILES)


def test_the_device_demo_surveys_the_devices_own_folder(up: Up, tmp_path: Path) -> None:
    text = DEVICES.read_text()
    key_block, laptop, task = blocks(text[: text.index("\n## ")], "sh")[:3]
    home = tmp_path / "home"
    home.mkdir()
    laptop_env = base_env(home) | {"HOME": str(home)}
    key = agentctl(up, *command_line(key_block, "DK=$(")[1:]).splitlines()[0]
    prepare = next(line for line in laptop.splitlines() if line.startswith("mkdir"))
    subprocess.run(["bash", "-c", prepare], env=laptop_env, check=True, timeout=30)
    serve = [a.replace("~", str(home)) for a in command_line(laptop, ".venv/bin/agentctl device")]
    device_env = laptop_env | {"AGENT_GATEWAY_URL": up.gateway, "AGENT_DEVICE_KEY": key}
    with (tmp_path / "device.log").open("wb") as log:
        device = subprocess.Popen(
            [str(AGENTCTL), *serve[1:]], env=device_env, cwd=home, stdout=log, stderr=log
        )
    try:
        wait_for("the device", lambda: "online" in agentctl(up, "devices"), TASK_SECONDS, up.proc)
        session = agentctl(up, *command_line(task, "S=$(")[1:]).strip()
        wait_status(up, session, "waiting for approval", "write_file")
        script = "\n".join(task.splitlines()[1:]).replace(".venv/bin/agentctl", str(AGENTCTL))
        subprocess.run(
            ["bash", "-euc", script], env=up.env | {"S": session}, check=True, timeout=120
        )
        wait_status(up, session, "completed")
    finally:
        device.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            device.wait(30)
        if device.poll() is None:
            device.kill()
    project = home / "project"
    names = tuple(p.name for p in project.rglob("*") if p.is_file() and "out" not in p.parts)
    assert names, "the demo puts no file on the device"
    assert_report(project, names)


def _started_and_waiting(up: Up, approvals: str) -> str:
    session = agentctl(up, *command_line(blocks(approvals, "sh")[0], "S=$(")[1:]).strip()
    wait_status(up, session, "waiting_approval", "call_2_0")
    return session


def test_readme_temporal_cli_approval_runs_as_written(up: Up) -> None:
    approvals = section(README, "Approvals from any client")
    session = _started_and_waiting(up, approvals)
    (cli,) = [b for b in blocks(approvals, "sh") if b.startswith("temporal workflow update")]
    path = f"{AGENTCTL.parent}:{os.environ['PATH']}"  # the temporal CLI the venv installed
    subprocess.run(
        ["bash", "-euc", cli], env=up.env | {"S": session, "PATH": path}, check=True, timeout=60
    )
    wait_status(up, session, "completed")
    assert_report(up.project / "workspace" / "default" / session, SEED_FILES)


def test_readme_http_approval_with_edited_arguments_runs_as_written(up: Up) -> None:
    approvals = section(README, "Approvals from any client")
    session = _started_and_waiting(up, approvals)
    (http,) = [b for b in blocks(approvals, "sh") if "curl" in b]
    key = agentctl(
        up, "keys", "create", "--tenant", "default", "--user", "ann",
        "--scope", "read", "--scope", "approve",
    ).splitlines()[0]  # fmt: skip
    script = http.replace("K=da_...", f"K={key}").replace("localhost:8000", up.gateway)
    inbox = subprocess.run(
        ["bash", "-euc", script], env=up.env | {"S": session}, check=True, timeout=60,
        capture_output=True, text=True,
    )  # fmt: skip
    assert "call_2_0" in inbox.stdout.splitlines()[0]  # the inbox listed the waiting call
    wait_status(up, session, "completed")
    root = up.project / "workspace" / "default" / session
    assert (root / "out" / "x.md").read_text() == "..."  # the edited arguments ran
