"""Which dev stack a process takes its variables from (workers/dev_env.py): a variable set in
the environment, then ./.devstack/env, then the per-user record `agentctl dev up` keeps; only
the stack's own variables, only from a file no one else may write, and a malformed file is
one clear error."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

from durable_agents.workers.dev_env import (
    NO_STACK,
    STACK_VARIABLES,
    DevEnvError,
    find_stack_file,
    stack_defaults,
    stack_env,
)
from durable_agents.workers.settings import AgentSettings, ModelSettings
from tests.support.dev_env import StackFiles, isolated_stack_files
from tests.support.processes import AGENTCTL

USER = {
    "TEMPORAL_ADDRESS": "127.0.0.1:40001",
    "DATABASE_URL": "postgresql+asyncpg://agent:user-pw@127.0.0.1:40002/agent",
    "S3_ENDPOINT_URL": "http://127.0.0.1:40003",
}
CWD = {
    "TEMPORAL_ADDRESS": "127.0.0.1:50001",
    "DATABASE_URL": "postgresql+asyncpg://agent:cwd-pw@127.0.0.1:50002/agent",
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StackFiles:
    return isolated_stack_files(tmp_path, monkeypatch)


def test_a_set_variable_wins_over_the_current_directorys_file_over_the_user_record(
    files: StackFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    files.write(files.user_file, USER)
    assert stack_defaults() == USER
    files.write(files.cwd_file, CWD)
    # The first file found is the stack: none of the record's variables comes along.
    assert stack_defaults() == CWD
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://agent:set@db/agent")
    assert stack_defaults() == {"TEMPORAL_ADDRESS": CWD["TEMPORAL_ADDRESS"]}
    assert stack_env() == {
        "TEMPORAL_ADDRESS": CWD["TEMPORAL_ADDRESS"],
        "DATABASE_URL": "postgresql+asyncpg://agent:set@db/agent",
    }
    files.cwd_file.unlink()
    assert stack_defaults() == {k: v for k, v in USER.items() if k != "DATABASE_URL"}


def test_only_the_stacks_own_variables_are_taken_from_a_file(
    files: StackFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_TENANT_ID", raising=False)
    monkeypatch.delenv("MODEL_BASE_URL", raising=False)
    path_before = os.environ["PATH"]
    injected = {
        "PATH": "/nowhere",
        "LD_PRELOAD": "/tmp/evil.so",
        "AGENT_TENANT_ID": "someone-else",
        "MODEL_BASE_URL": "http://attacker.example",
    }
    found = files.write(files.user_file, USER | injected)
    stack = find_stack_file()
    assert stack is not None and stack.path == found
    assert dict(stack.values) == USER
    assert set(stack_defaults()) <= set(STACK_VARIABLES)
    assert os.environ["PATH"] == path_before
    assert AgentSettings().tenant_id == "default"
    assert ModelSettings().base_url is None


@pytest.mark.parametrize("mode", [0o620, 0o602], ids=["group-writable", "world-writable"])
def test_a_record_others_may_write_is_ignored_with_one_warning(
    files: StackFiles, caplog: pytest.LogCaptureFixture, mode: int
) -> None:
    files.write(files.user_file, USER, mode=mode)
    with caplog.at_level(logging.WARNING):
        assert stack_defaults() == {}
        assert stack_defaults() == {}
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned
    assert str(files.user_file) in warned[0] and "\n" not in warned[0]
    with pytest.raises(DevEnvError, match="no dev stack found"):
        stack_env()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
def test_a_record_owned_by_another_user_is_ignored(
    files: StackFiles, caplog: pytest.LogCaptureFixture
) -> None:
    os.chown(files.write(files.user_file, USER), 65534, 65534)
    with caplog.at_level(logging.WARNING):
        assert stack_defaults() == {}
    assert "owned by uid 65534" in caplog.text


@pytest.mark.parametrize(
    "line",
    [
        "export DATABASE_URL='postgresql+asyncpg://agent:secret-pw@h/agent",
        "rm -rf secret-pw",
        "export DATABASE_URL=secret-pw and-more",
    ],
    ids=["unclosed-quote", "a-command", "two-words"],
)
def test_a_malformed_file_is_one_line_naming_it_never_its_text(
    files: StackFiles, line: str
) -> None:
    files.write(files.cwd_file, CWD)
    with files.cwd_file.open("a") as f:
        f.write(line + "\n")
    with pytest.raises(DevEnvError) as raised:
        stack_defaults()
    message = str(raised.value)
    assert message.startswith(f"{files.cwd_file.relative_to(files.here)}, line 4, ")
    assert "\n" not in message and "secret-pw" not in message


def test_no_stack_is_found_unless_a_file_or_the_environment_names_one(
    files: StackFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DevEnvError) as raised:
        stack_env()
    assert str(raised.value) == NO_STACK
    for name, value in USER.items():
        monkeypatch.setenv(name, value)
    assert stack_env() == USER


def test_agentctl_names_a_malformed_record_in_one_line(files: StackFiles) -> None:
    files.write(files.user_file, USER)
    with files.user_file.open("a") as f:
        f.write("export DATABASE_URL='secret-pw\n")
    ran = subprocess.run(
        [str(AGENTCTL), "sessions"],
        env=dict(os.environ),
        cwd=files.here,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ran.returncode, ran.stdout) == (1, ""), ran.stderr
    assert ran.stderr == (
        f"error: {files.user_file}, line 5, is not `export NAME=value`: remove the file or "
        "run `agentctl dev up` again to rewrite it\n"
    )
