"""A stack `agentctl dev up` started on ports of its own choosing is found from any
directory: agentctl run where there is no .devstack, with no DATABASE_, S3_ or TEMPORAL_
variable set, reaches it through the per-user record dev up keeps; `agentctl env` prints
what a shell needs; the record goes when the stack stops."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from durable_agents.workers.dev_env import NO_STACK, STACK_VARIABLES, STATE_HOME_ENV, USER_RECORD
from tests.test_devup_stop import (
    AGENTCTL,
    UP_TIMEOUT,
    base_env,
    dev_up,
    ended_within,
    processes_of,
    wait_for,
)


@dataclass(frozen=True)
class Up:
    proc: subprocess.Popen[bytes]
    elsewhere: Path  # a directory with no .devstack
    env: dict[str, str]  # no stack variable; dev up's per-user state home
    record: Path
    env_file: Path  # the one in dev up's state dir


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("anywhere")
    project, elsewhere, state = root / "project", root / "elsewhere", root / "stack"
    project.mkdir()
    elsewhere.mkdir()
    state_home = {STATE_HOME_ENV: str(root / "state-home")}
    proc = dev_up(state, base_env(project) | state_home, project)
    log = project / "dev-up.log"

    def serving() -> bool:
        return "cloud worker on" in log.read_text(errors="replace")

    try:
        wait_for("the worker", serving, UP_TIMEOUT, proc)
        yield Up(
            proc,
            elsewhere,
            base_env(elsewhere) | state_home,
            root / "state-home" / USER_RECORD,
            state / "env",
        )
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            ended_within(proc, 60)
        for pid in processes_of(state):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def agentctl(up: Up, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AGENTCTL), *args],
        env=up.env | env,
        cwd=up.elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
    )


def exported(text: str) -> dict[str, str]:
    words = shlex.split(text, comments=True)  # export NAME=VALUE lines
    return dict(word.split("=", 1) for word in words if word != "export")


def test_agentctl_in_another_directory_reaches_the_stack_without_exports(up: Up) -> None:
    assert not (up.elsewhere / ".devstack").exists()
    assert not [n for n in up.env if n.startswith(("DATABASE_", "S3_", "TEMPORAL_"))]
    listed = agentctl(up, "sessions")
    assert listed.returncode == 0, listed.stderr
    started = agentctl(up, "start", "say hello")
    assert started.returncode == 0, started.stderr
    session = started.stdout.strip()
    shown = agentctl(up, "status", session)
    assert shown.returncode == 0, shown.stderr
    assert f"session {session}" in shown.stdout
    assert "workflow: step=" in shown.stdout  # the live state, from Temporal


def test_agentctl_env_prints_the_exports_a_shell_sources(up: Up) -> None:
    stack = exported(up.env_file.read_text())
    printed = agentctl(up, "env")
    assert printed.returncode == 0, printed.stderr
    assert exported(printed.stdout) == stack
    names = " ".join(STACK_VARIABLES)
    script = f'eval "$({shlex.quote(str(AGENTCTL))} env)"\n'
    script += f'for n in {names}; do echo "$n=${{!n}}"; done'
    sourced = subprocess.run(
        ["bash", "-c", script],
        env=up.env,
        cwd=up.elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert dict(line.split("=", 1) for line in sourced.stdout.splitlines()) == stack


def test_a_variable_set_wins_over_the_record(up: Up) -> None:
    printed = agentctl(up, "env", TEMPORAL_ADDRESS="127.0.0.1:9")
    assert printed.returncode == 0, printed.stderr
    shown = exported(printed.stdout)
    assert shown["TEMPORAL_ADDRESS"] == "127.0.0.1:9"
    assert shown["DATABASE_URL"] == exported(up.env_file.read_text())["DATABASE_URL"]


# Last: it stops the module's stack.
def test_the_record_goes_when_the_stack_stops(up: Up) -> None:
    assert up.record.stat().st_mode & 0o777 == 0o600
    up.proc.send_signal(signal.SIGINT)
    ended_within(up.proc, 60)
    assert not up.record.exists()
    none = agentctl(up, "env")
    assert (none.returncode, none.stdout, none.stderr) == (1, "", f"error: {NO_STACK}\n")
