"""The README's main command works as written: `make run` runs `agentctl demo`, which runs
here end to end; what it prints is what the README and docs/getting-started.md show (their
samples, checked against this run's output with ids, hashes, ports, counts and durations
set aside; the approver's lines and the watch's each in their own order)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import httpx

from tests.support.doc_blocks import DocBlock, doc_block
from tests.support.output_samples import unmatched
from tests.support.processes import as_in_a_terminal

AGENTCTL = Path(sys.executable).parent / "agentctl"
DEMO = ["demo"]  # what this module runs: `agentctl demo`, the `run` target's recipe
# (tests/test_docs_command_lines.py checks the Makefile says so)
# What the demo's approver prints, from a task beside the watch (workers/demo/run.py): its
# lines and the watch's interleave as the two run, each in its own order.
DECIDER = ("approval needed", "  auto-approving")


def output_samples() -> list[DocBlock]:
    return [
        doc_block("README.md", "starting the embedded stack"),
        doc_block("docs/getting-started.md", "╭──"),
    ]


GATEWAY_LINE = re.compile(r"gateway on (http://127\.0\.0\.1:\d+) \(web page")


async def test_agentctl_demo_runs_the_task_to_completion_and_stops_its_stack() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "S3_", "MODEL_"))}
    proc = await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        *DEMO,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    healthz: int | None = None
    async with asyncio.timeout(240):
        while line := (await proc.stdout.readline()).decode():
            lines.append(line)
            if healthz is None and (found := GATEWAY_LINE.search(line)):
                # While the demo runs: the URL it printed answers.
                async with httpx.AsyncClient(timeout=10) as http:
                    healthz = (await http.get(f"{found.group(1)}/healthz")).status_code
        await proc.wait()
    text = "".join(lines)
    assert proc.returncode == 0, text[-3000:]
    assert healthz == 200, text[-3000:]
    assert "demo API key: not shown off a terminal" in text and "da_" not in text
    assert "auto-approving" in text
    assert "6 artifacts verified" in text
    assert "| `data/readings.csv` | 7 | 7 |" in text
    assert "task completed" in text
    # The demo checks its own goal, not only the task's status (issue 30).
    assert "report out/report.md: present, covers all 4 workspace files" in text
    assert "completed (checked)" in text  # the demo goal is the task's own check
    assert "demo goal done" in text
    assert "Traceback" not in text
    assert not _processes_with("durable-agents-demo-"), "the demo left services running"
    # What the pages show it printing is what it printed.
    output = text.splitlines()
    for sample in output_samples():
        missing = unmatched(sample.text, output, apart=DECIDER)
        assert missing == [], f"{sample.where()}: {missing} not in\n{text}"


KEPT_LINE = re.compile(r"the demo's state is kept in (\S+)")
SESSION_LINE = re.compile(r"^session ([0-9a-f-]{36}) ", re.MULTILINE)


async def _demo_held_at_its_approval(answer: bytes | None) -> tuple[int | None, str]:
    """`agentctl demo --interactive`, whose task cannot end before its approval is answered:
    `answer` on its stdin at the question, or, with None, Ctrl-C once its session is shown
    (mid-run, whatever the machine's pace)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "S3_", "MODEL_"))}
    proc = await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        "demo",
        "--interactive",
        env=env,
        preexec_fn=as_in_a_terminal,  # a pytest-xdist worker's children ignore SIGINT
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None and proc.stdin is not None
    lines: list[str] = []
    async with asyncio.timeout(240):
        while line := (await proc.stdout.readline()).decode():
            lines.append(line)
            if proc.stdin.is_closing():
                continue
            if answer is None and SESSION_LINE.match(line):
                proc.send_signal(signal.SIGINT)
                proc.stdin.close()
            elif answer is not None and "approval needed" in line:
                proc.stdin.write(answer)
                await proc.stdin.drain()
                proc.stdin.close()
        await proc.wait()
    return proc.returncode, "".join(lines)


async def test_a_stopped_demo_keeps_its_state_and_says_how_to_look_at_it() -> None:
    code, text = await _demo_held_at_its_approval(None)
    _assert_kept(text)
    assert code == 130, text[-3000:]


async def test_a_failed_demo_goal_keeps_the_state_to_look_at() -> None:
    # Declined: the report is never written, the goal's check fails.
    code, text = await _demo_held_at_its_approval(b"n\n")
    _assert_kept(text)
    assert code == 1, text[-3000:]


def _assert_kept(text: str) -> None:
    found = KEPT_LINE.search(text)
    assert found, text[-3000:]
    state = Path(found.group(1))
    try:
        assert "Traceback" not in text, text[-3000:]
        session = SESSION_LINE.search(text)
        assert session, text[-3000:]
        stack = state / "stack"
        assert f"agentctl dev up --state-dir {stack} --model-provider offline" in text
        assert f"agentctl show {session.group(1)}" in text
        # What those commands look at is there: the database, the S3 data, the logs.
        assert (stack / "postgres" / "PG_VERSION").is_file()
        assert (stack / "s3").is_dir() and (stack / "temporal.db").is_file()
        assert (stack / "logs" / "temporal.log").is_file()
        assert f"logs: {stack / 'logs'}" in text
        assert not _processes_with(str(state)), "the demo left services running"
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _processes_with(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in args:
            found.append(args)
    return found
