"""`agentctl` runs to completion as processes forked from one that has already imported it.

Each run is a process of its own with its own environment, working directory, stdin
(/dev/null), stdout, stderr and exit code, entering agentctl at its script's `run()`; only
the import (about a second of CPU per process) is shared, done once per test process by a
zygote started on first use. A run whose interpreter start-up variables (PYTHON*) differ
from the zygote's is started as a plain `agentctl` process instead.

`run_agentctl` runs a command to its end; `spawn_agentctl` leaves one running (a worker, a
device) as a process the test can signal and wait for. Commands whose process group or
terminal matters (dev up, watch until Ctrl-C) are started with subprocess.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

AGENTCTL = Path(sys.executable).parent / "agentctl"
REPO = Path(__file__).resolve().parents[2]
# Exit code of a forked child that failed before agentctl ran (never agentctl's own).
SETUP_FAILED = 70


def _startup_variables(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


class _Zygote:
    """The client side: one zygote process, its replies read by a thread."""

    def __init__(self) -> None:
        self.env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.agentctl_fork"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=self.env,
        )
        self.lock = threading.Condition()
        self.replies: dict[int, dict[str, Any]] = {}
        self.next_id = 0
        threading.Thread(target=self._read, name="agentctl-zygote", daemon=True).start()
        atexit.register(self.close)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            reply = json.loads(line)
            with self.lock:
                self.replies.setdefault(reply["id"], {}).update(reply)
                self.lock.notify_all()
        with self.lock:
            self.replies[-1] = {"gone": True}
            self.lock.notify_all()

    def _wait(self, rid: int, key: str, timeout: float | None) -> dict[str, Any] | None:
        with self.lock:
            self.lock.wait_for(
                lambda: key in self.replies.get(rid, {}) or -1 in self.replies, timeout
            )
            reply = self.replies.get(rid, {})
            if -1 in self.replies and key not in reply:
                raise RuntimeError("the agentctl zygote exited")
            return reply if key in reply else None

    def fork(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None,
        out: Path,
        err: Path,
        *,
        append: bool = False,
    ) -> tuple[int, int]:
        """Fork `agentctl ARGV` with stdout and stderr to files; (request id, pid)."""
        assert self.proc.stdin is not None
        with self.lock:
            rid, self.next_id = self.next_id, self.next_id + 1
            request = {
                "id": rid,
                "argv": list(argv),
                "env": dict(env),
                "cwd": cwd,
                "out": str(out),
                "err": str(err),
                "append": append,
            }
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        started = self._wait(rid, "pid", 30)
        assert started is not None, "the agentctl zygote did not fork"
        return rid, int(started["pid"])

    def run(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="agentctl-") as scratch:
            out, err = Path(scratch, "out"), Path(scratch, "err")
            rid, pid = self.fork(argv, env, cwd, out, err)
            done = self._wait(rid, "code", timeout)
            if done is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._wait(rid, "code", 30)
                raise subprocess.TimeoutExpired([str(AGENTCTL), *argv], timeout)
            with self.lock:
                del self.replies[rid]
            return subprocess.CompletedProcess(
                [str(AGENTCTL), *argv],
                done["code"],
                out.read_text(errors="replace"),
                err.read_text(errors="replace"),
            )

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class ForkedProcess:
    """A long-lived agentctl the zygote forked: what the tests use of a Popen (pid, poll,
    wait, signals). Its exit is read from the zygote, which reaps it."""

    def __init__(self, zygote: _Zygote, rid: int, pid: int, argv: Sequence[str]) -> None:
        self._zygote, self._rid, self.pid, self.args = zygote, rid, pid, list(argv)

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        with self._zygote.lock:
            code = self._zygote.replies.get(self._rid, {}).get("code")
        return None if code is None else int(code)

    def wait(self, timeout: float | None = None) -> int:
        done = self._zygote._wait(self._rid, "code", timeout)
        if done is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return int(done["code"])

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_zygote: _Zygote | None = None
_started = threading.Lock()


def _zygote_for(env: Mapping[str, str]) -> _Zygote | None:
    """The zygote, started on first use; None when `env` needs an interpreter of its own."""
    global _zygote
    with _started:
        if _zygote is None:
            _zygote = _Zygote()
        zygote = _zygote
    return zygote if _startup_variables(env) == _startup_variables(zygote.env) else None


def spawn_agentctl(
    argv: Sequence[str], *, env: Mapping[str, str], log: Path, cwd: str | Path | None = None
) -> ForkedProcess | subprocess.Popen[bytes]:
    """`agentctl ARGV` left running, its stdout and stderr appended to `log`."""
    where = None if cwd is None else str(cwd)
    zygote = _zygote_for(env)
    if zygote is None:
        with log.open("ab") as out:
            return subprocess.Popen(
                [str(AGENTCTL), *argv],
                env=dict(env),
                cwd=where,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    log.touch()  # there once this returns, as with subprocess
    rid, pid = zygote.fork(argv, env, where, log, log, append=True)
    return ForkedProcess(zygote, rid, pid, [str(AGENTCTL), *argv])


def run_agentctl(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`agentctl ARGV` to its end, as `subprocess.run(..., capture_output=True, text=True)`
    would return it (TimeoutExpired after `timeout`, the process killed)."""
    where = None if cwd is None else str(cwd)
    zygote = _zygote_for(env)
    if zygote is None:
        return subprocess.run(
            [str(AGENTCTL), *argv],
            env=dict(env),
            cwd=where,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    return zygote.run(argv, env, where, timeout)


# The zygote: imports agentctl, then forks one child per request line on stdin.


def _child(request: dict[str, Any], wake: tuple[int, int]) -> None:
    """In the forked child: become `agentctl ARGV` as its script would start it."""
    try:
        signal.set_wakeup_fd(-1)
        for fd in wake:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # As from a shell: the test process (pytest-xdist) may ignore SIGINT.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        mode = os.O_APPEND if request["append"] else os.O_TRUNC
        for fd, path in ((1, request["out"]), (2, request["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o600), fd)
        os.environ.clear()
        os.environ.update(request["env"])
        if request["cwd"] is not None:
            os.chdir(request["cwd"])
        sys.argv = [str(AGENTCTL), *request["argv"]]
        from durable_agents.workers.cli.main import run

        run()  # flushes and leaves with os._exit(its exit code)
    finally:
        os._exit(SETUP_FAILED)


def _serve() -> None:
    import durable_agents.workers.cli.main  # noqa: F401  (the import every child shares)

    wake = os.pipe()
    for fd in wake:
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "requests")
    selector.register(wake[0], selectors.EVENT_READ, "children")
    running: dict[int, int] = {}  # pid -> request id
    pending = b""
    open_input = True

    def reply(**fields: Any) -> None:
        os.write(1, json.dumps(fields).encode() + b"\n")

    while open_input or running:
        for key, _ in selector.select():
            if key.data == "children":
                with contextlib.suppress(BlockingIOError):
                    os.read(wake[0], 4096)
            elif open_input:
                chunk = os.read(0, 65536)
                if not chunk:
                    open_input = False
                    selector.unregister(0)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    request = json.loads(line)
                    sys.stdout.flush()
                    pid = os.fork()
                    if pid == 0:
                        _child(request, wake)
                    running[pid] = request["id"]
                    reply(id=request["id"], pid=pid)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reply(id=running.pop(pid), code=os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    _serve()
