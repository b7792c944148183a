"""A process's view of the dev stack's env files (workers/dev_env.py), for unit tests: a
current directory and a per-user state dir of the test's own, no stack variable set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from durable_agents.workers.dev_env import (
    DEV_ENV_FILE,
    STACK_VARIABLES,
    STATE_HOME_ENV,
    USER_RECORD,
    export_lines,
)


@dataclass(frozen=True)
class StackFiles:
    here: Path  # the current directory
    cwd_file: Path  # ./.devstack/env
    user_file: Path  # the per-user record

    def write(self, path: Path, env: Mapping[str, str], *, mode: int = 0o600) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# written by a test\n" + export_lines(env))
        path.chmod(mode)
        return path


def isolated_stack_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StackFiles:
    here, state = tmp_path / "here", tmp_path / "state"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv(STATE_HOME_ENV, str(state))
    for name in STACK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return StackFiles(here, here / DEV_ENV_FILE, state / USER_RECORD)
