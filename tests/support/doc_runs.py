"""A doc block's shell lines and Python, run as a reader runs them, against the `up` stack
(tests/support/dev_up.py): bash -euo pipefail in a directory whose `.venv` is the suite's,
with the stack's variables (what `agentctl env` exports) and the block's own ($S, $K, ...).

The docs name dev up's default addresses; `at_stack` is the one table that puts the test
stack's in their place. Nothing else in a block's text is changed here: a test that fills a
placeholder (`K=da_...`) names it where it does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.dev_up import VENV, Up

# PATH with the temporal CLI and `python` a reader's `make run` installed first.
VENV_PATH = f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"
# Runs the Python on stdin as an async REPL would: top-level await allowed. Once it is done
# and flushed the process leaves without the interpreter's teardown, as agentctl does: a
# Temporal client's Rust threads can abort that teardown (temporalio/sdk-python#300).
_RUN_PYTHON = """
import ast, asyncio, os, sys
async def main(source):
    code = compile(source, "<doc block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    pending = eval(code, {"__name__": "__main__"})
    if pending is not None:
        await pending
asyncio.run(main(sys.stdin.read()))
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def at_stack(text: str, up: Up, gateway: str | None = None) -> str:
    """`text` with dev up's default addresses as the test stack has them: the gateway's
    (`localhost:8000`, `127.0.0.1:8000`; `gateway`, else dev up's) and Temporal's
    (`localhost:7233`, `127.0.0.1:7233`: TEMPORAL_ADDRESS)."""
    served = (gateway or up.gateway).removeprefix("http://")
    temporal = up.env["TEMPORAL_ADDRESS"]
    for host in ("localhost", "127.0.0.1"):
        text = text.replace(f"{host}:8000", served).replace(f"{host}:7233", temporal)
    return text


def lines(block: str, *starts: str) -> str:
    """The block's lines that start with each of `starts` (exactly one each, with the lines
    a trailing backslash continues), in the block's order."""
    rows = block.splitlines()
    picked: set[int] = set()
    for start in starts:
        found = [n for n, row in enumerate(rows) if row.startswith(start)]
        assert len(found) == 1, f"{len(found)} lines start with {start!r}:\n{block}"
        n = found[0]
        picked.add(n)
        while rows[n].rstrip().endswith("\\"):
            n += 1
            picked.add(n)
    return "\n".join(rows[n] for n in sorted(picked))


def sh(
    up: Up,
    script: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    /,
    **variables: str,
) -> str:
    """`script` run by bash -euo pipefail in `cwd` (dev up's directory by default) with the
    stack's variables (or `env`, on a machine without them) and `variables`; its stdout,
    once it exited 0."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=(up.env if env is None else env) | variables,
        cwd=cwd or up.project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{script}\nexit {done.returncode}: {done.stderr}"
    return done.stdout


def assigned(up: Up, script: str, cwd: Path | None = None, /, **variables: str) -> str:
    """The value the script's first line, `NAME=$(...)`, gives NAME, once the whole script
    ran as written."""
    name = script.split("=", 1)[0]
    assert name.isidentifier(), script
    out = sh(up, f'{script}\nprintf "\\n%s" "${name}"', cwd, **variables)
    return out.rsplit("\n", 1)[1]


def in_background(
    script: str, env: dict[str, str], cwd: Path, log: Path
) -> subprocess.Popen[bytes]:
    """`script` (a command that serves until Ctrl-C) run by bash in a process group of its
    own, its output to `log`; `interrupt` stops it."""
    with log.open("wb") as out:
        return subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def interrupt(proc: subprocess.Popen[bytes]) -> int:
    """Ctrl-C to the process group; killed if still running 30 s later. Its exit code."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def python(up: Up, source: str, cwd: Path | None = None, /, **variables: str) -> str:
    """`source` run by the venv's Python with top-level await (as `python -m asyncio`
    would), with the stack's variables and `variables`; its stdout, once it exited 0."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN_PYTHON],
        input=source,
        env=up.env | variables,
        cwd=cwd or up.project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{source}\nexit {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout
