"""One real `agentctl dev up` for the test modules that run the docs' commands against it
(Temporal dev server, PostgreSQL, SeaweedFS, a cloud worker and the gateway, on free ports),
started from docs/cli.md's own `dev up` line; `agentctl` and `wait_status` to drive it.

A module takes the `up` fixture by importing `dev_up_stack` (module-scoped: each module that
uses it starts its own stack, so two modules at most)."""

from __future__ import annotations

import contextlib
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

from tests.support.agentctl_fork import run_agentctl
from tests.support.doc_blocks import doc_block
from tests.test_devup_stop import (
    AGENTCTL,
    UP_TIMEOUT,
    base_env,
    dev_up,
    ended_within,
    processes_of,
    wait_for,
)

VENV = AGENTCTL.parent.parent  # the suite's venv: what `.venv` is to a reader of the docs
TASK_SECONDS = 90.0


@dataclass(frozen=True)
class Up:
    proc: subprocess.Popen[bytes]
    project: Path  # dev up's directory (its workspace is project/workspace), with a .venv
    env: dict[str, str]  # the stack's variables, as `agentctl env` prints them
    gateway: str  # http://127.0.0.1:PORT


def with_venv(directory: Path) -> Path:
    """`directory` with a `.venv` that is the suite's venv, so that a doc's
    `.venv/bin/agentctl` run there is the agentctl under test."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".venv").symlink_to(VENV, target_is_directory=True)
    return directory


def command_line(block: str, starts: str) -> list[str]:
    """The block's line that starts with `starts`, as argv up to a pipe or the `)` of a
    `$(...)`, with agentctl the test's own."""
    line = next(line for line in block.splitlines() if line.startswith(starts))
    captured = re.match(r"\w+=\$\((.*)\)", line.split("#")[0].strip())
    argv = shlex.split(captured.group(1) if captured else line, comments=True)
    argv = argv[: argv.index("|")] if "|" in argv else argv
    return [str(AGENTCTL) if a == ".venv/bin/agentctl" else a for a in argv]


@pytest.fixture(scope="module", name="up")
def dev_up_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    """docs/cli.md's dev stack: the block's `make run` built the venv this suite runs in;
    its `dev up` line runs as written, plus a state dir of its own, no Web UI and free
    ports (`--...-port 0`) so that it runs beside any other stack."""
    block = doc_block("docs/cli.md", "make run").text
    command = command_line(block, ".venv/bin/agentctl dev up")
    assert command[1:] == ["dev", "up", "--model-provider", "offline"], block
    root = tmp_path_factory.mktemp("examples")
    project, state = with_venv(root / "project"), root / "stack"
    env = base_env(project) | {"XDG_STATE_HOME": str(root / "state-home")}
    proc = dev_up(state, env, project, command)
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
    """`agentctl ARGS` against the stack, to its end (tests/support/agentctl_fork.py); its
    stdout, once it exited 0."""
    done = run_agentctl(args, env=env or up.env, cwd=up.project)
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_status(up: Up, session: str, wanted: str, *also: str, tenant: str = "default") -> str:
    """`agentctl status` of the session once it shows `wanted` and each of `also`; fails at
    once if the task ends otherwise, or after TASK_SECONDS."""
    deadline = time.monotonic() + TASK_SECONDS
    while True:
        shown = agentctl(up, "status", session, "--tenant", tenant)
        if wanted in shown and all(a in shown for a in also):
            return shown
        ended = wanted != "completed" and "workflow: step" in shown and "status=completed" in shown
        assert not ended and time.monotonic() < deadline, agentctl(
            up, "show", session, "--tenant", tenant
        )
        time.sleep(0.5)


def gateway_call(gateway: str, key: str, method: str, path: str, body: Any = None) -> Any:
    """The gateway's JSON answer to one request with `key`; an error status raises."""
    request = urllib.request.Request(
        gateway + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())
