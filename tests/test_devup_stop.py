"""`agentctl dev up` always stops what it started: Ctrl-C during start-up, Ctrl-C while its
worker is stuck in a tool, and a second SIGINT or SIGTERM, each end the process with no
Temporal, PostgreSQL or SeaweedFS process (nor the in-process worker and gateway) left."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from durable_agents.workers.cli.devup_signals import GRACE_SECONDS
from tests.support.processes import as_in_a_terminal

AGENTCTL = Path(sys.executable).parent / "agentctl"
UP_TIMEOUT = 150.0
DEV_UP = (str(AGENTCTL), "dev", "up", "--model-provider", "offline")

# A tool that never yields its worker's event loop: the worker can neither finish it nor
# wind down, so only dev up's own signal handling can stop the stack.
STALL_AGENT = '''
import time
from pathlib import Path

from durable_agents import Agent, ToolContext, tool


@tool(effect="read_only")
async def stall(ctx: ToolContext, marker: str) -> str:
    """Blocks the worker."""
    Path(marker).write_text("running")
    time.sleep(300)
    return "done"


AGENTS = [Agent(name="staller", instructions="Call stall.", tools=[stall])]
'''


def processes_of(state: Path) -> dict[int, str]:
    """The live processes whose command line names state (dev up's services), by pid."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = cmdline.with_name("stat").read_text()
        except OSError:
            continue
        if str(state) in text and status.split(")")[-1].split()[0] != "Z":
            found[int(cmdline.parent.name)] = text
    return found


def base_env(cwd: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "S3_", "MODEL_", "TEMPORAL_", "AGENT_", "PG"))
    }
    # The test's agent module, and whatever the test run itself imports from.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")]))
    return env


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "up"
    yield root
    # Whatever a failing run left is ours to end (never anyone else's: named by state).
    for pid in processes_of(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def dev_up(
    state: Path, env: dict[str, str], cwd: Path, command: Sequence[str] = DEV_UP
) -> subprocess.Popen[bytes]:
    """`command` (an `agentctl dev up ...`) with its own state dir, no Web UI and free ports."""
    argv = [*command, "--state-dir", str(state), "--no-ui"]
    argv += ["--temporal-port", "0", "--postgres-port", "0", "--s3-port", "0"]
    argv += ["--gateway-port", "0"]
    with (cwd / "dev-up.log").open("wb") as log:
        return subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=as_in_a_terminal,
        )


def wait_for(
    what: str, ready: Callable[[], object], timeout: float, proc: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"dev up exited before {what}"
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f}s"
        time.sleep(0.05)


def ended_within(proc: subprocess.Popen[bytes], seconds: float) -> float:
    began = time.monotonic()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"dev up still running {seconds:.0f}s after the signal")
    return time.monotonic() - began


def assert_nothing_left(state: Path, cwd: Path) -> None:
    # A moment for a tool the stop ran (pg_ctl, already done with its server) to exit.
    deadline = time.monotonic() + 5
    while (left := processes_of(state)) and time.monotonic() < deadline:
        time.sleep(0.1)
    log = (cwd / "dev-up.log").read_text(errors="replace")[-3000:]
    assert not left, f"dev up left {sorted(left.values())}\n{log}"


@pytest.mark.parametrize(
    ("first", "second"),
    [(signal.SIGINT, None), (signal.SIGTERM, None), (signal.SIGINT, signal.SIGINT)],
    ids=["sigint", "sigterm", "sigint-twice"],
)
def test_a_signal_during_start_up_stops_what_was_started(
    state: Path, tmp_path: Path, first: signal.Signals, second: signal.Signals | None
) -> None:
    proc = dev_up(state, base_env(tmp_path), tmp_path)
    # Temporal launched: the stack is half way up (PostgreSQL in initdb or starting too).
    wait_for(
        "a launched service",
        lambda: any("temporal" in c for c in processes_of(state / "temporal.db").values()),
        UP_TIMEOUT,
        proc,
    )
    proc.send_signal(first)
    if second is not None:
        time.sleep(0.5)
        proc.send_signal(second)
    ended_within(proc, 60)
    assert_nothing_left(state, tmp_path)


@pytest.mark.parametrize("second", [signal.SIGTERM, None], ids=["then-sigterm", "once"])
def test_ctrl_c_stops_the_stack_while_the_worker_is_stuck_in_a_tool(
    state: Path, tmp_path: Path, second: signal.Signals | None
) -> None:
    (tmp_path / "stall_agent.py").write_text(STALL_AGENT)
    env = base_env(tmp_path) | {"AGENT_DEFINITIONS": "stall_agent:AGENTS"}
    proc = dev_up(state, env, tmp_path)
    env_file = state / "env"
    wait_for("the stack's env file", env_file.exists, UP_TIMEOUT, proc)
    wait_for(
        "the worker",
        lambda: "cloud worker on" in (tmp_path / "dev-up.log").read_text(errors="replace"),
        UP_TIMEOUT,
        proc,
    )
    words = shlex.split(env_file.read_text(), comments=True)  # export NAME=VALUE lines
    stack_env = dict(word.split("=", 1) for word in words if word != "export")
    marker = tmp_path / "stalled"
    start = [str(AGENTCTL), "start", "--agent", "staller", f"stall marker={marker}"]
    started = subprocess.run(
        start, env=env | stack_env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 0, started.stdout + started.stderr
    wait_for("the tool to run", marker.exists, 120, proc)

    proc.send_signal(signal.SIGINT)
    if second is None:
        took = ended_within(proc, GRACE_SECONDS + 45)
        assert took >= GRACE_SECONDS - 1  # the orderly stop was given its time first
        assert proc.returncode == 128 + signal.SIGINT
    else:
        time.sleep(1)
        proc.send_signal(second)
        assert ended_within(proc, 30) < GRACE_SECONDS  # not the grace: the second signal
        assert proc.returncode == 128 + second
    assert_nothing_left(state, tmp_path)
