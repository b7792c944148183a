"""A long-running child process in its own process group, logging to a file."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from durable_agents.workers.stack.errors import StackError

logger = logging.getLogger(__name__)

# What a service creates is its own: temporal.db, weed's volumes, their logs (roles.py).
SERVICE_UMASK = 0o077


def find_executable(name: str) -> Path:
    """name on PATH, else next to the running interpreter (a venv's bin dir)."""
    found = shutil.which(name)
    if found:
        return Path(found)
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return beside
    raise StackError(f"{name!r} executable not found on PATH or in {beside.parent}")


def child_env(drop_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """os.environ without the variables whose names start with drop_prefixes."""
    return {k: v for k, v in os.environ.items() if not k.startswith(drop_prefixes)}


def open_private_log(path: Path) -> BinaryIO:
    """path opened for appending, readable by its owner only (a log may quote a failed
    statement or a request)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file, or "" when there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class ServiceProcess:
    """One server process; stop() takes its whole process group down."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        umask: int = SERVICE_UMASK,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.umask = umask
        self._proc: subprocess.Popen[bytes] | None = None
        # Launch and stop exclude each other, and nothing launches after a stop: a stop
        # from another thread (Ctrl-C during start-up) never misses the process.
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Launch the process; output is appended to log_path (0600). StackError after
        stop()."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open_private_log(self.log_path) as log:
            if self._stopped:
                raise StackError(f"{self.name}: stopped before it started")
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            log.write(f"--- {stamp} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            # Own session: a Ctrl-C in the parent's terminal must not reach it, and
            # stop() can signal the whole group.
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                umask=self.umask,
            )
            logger.debug("%s started, pid %s", self.name, self._proc.pid)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the group, SIGKILL it after timeout seconds (at once when timeout <= 0)."""
        with self._lock:
            self._stopped = True
            proc = self._proc
        if proc is None:
            return
        if timeout <= 0:
            self._signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        elif proc.poll() is None:
            self._signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("%s ignored SIGTERM for %.0fs, killing", self.name, timeout)
                self._signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        # Leftover children of the group, if any.
        self._signal_group(proc.pid, signal.SIGKILL)
        self._proc = None

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def failure(self, message: str) -> StackError:
        """A StackError carrying message, the exit status and the log tail."""
        code = self._proc.poll() if self._proc else None
        status = f" (exit code {code})" if code is not None else ""
        tail = log_tail(self.log_path)
        return StackError(f"{self.name}: {message}{status}; log {self.log_path}:\n{tail}")

    def wait_until(
        self, ready: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.05
    ) -> None:
        """Poll ready() until true; fail early if the process exits."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive:
                raise self.failure(f"exited before {what}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise self.failure(f"not {what} after {timeout:.0f}s")
            time.sleep(interval)
