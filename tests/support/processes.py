"""Real worker processes (cloud and device), so a test can SIGKILL them: `agentctl worker`
and `agentctl device` forked from the zygote (tests/support/agentctl_fork.py), any other
command started with subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from durable_agents.storage.agent_state import agent_state
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.agentctl_fork import AGENTCTL, REPO, ForkedProcess, spawn_agentctl


class WorkerProcess:
    def __init__(
        self,
        ep: StackEndpoints,
        *,
        queue: str,
        workspace: Path,
        script: list[dict[str, Any]],
        log: Path,
        workspace_scope: str = "session",
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """`workspace` is the workspace base (AGENT_WORKSPACE); see storage.workspaces.
        `command` replaces `agentctl worker` (a worker with tools of a test's own)."""
        script_path = log.with_suffix(".script.json")
        script_path.write_text(json.dumps(script))
        self.env = {
            **os.environ,
            **ep.env(),
            "MODEL_PROVIDER": "scripted",
            "MODEL_SCRIPT_PATH": str(script_path),
            "AGENT_WORKSPACE": str(workspace),
            "AGENT_WORKSPACE_SCOPE": workspace_scope,
            "AGENT_TASK_QUEUE": queue,
            **(env or {}),
        }
        self.command = command or [str(AGENTCTL), "worker"]
        self.log = log
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None

    def start(self) -> None:
        if self.command[0] == str(AGENTCTL):
            self.proc = spawn_agentctl(self.command[1:], env=self.env, log=self.log, cwd=REPO)
            return
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup, no graceful shutdown, exactly like a lost machine."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def wait_started(self, timeout: float = 90) -> None:
        # A bound for a worker that never starts, not a speed check: on 2 busy cores an
        # import and a first poll can take tens of seconds.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log.read_text()[-2000:]}")
            if "cloud worker on" in self.log.read_text():
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker did not start:\n{self.log.read_text()[-2000:]}")


class DeviceProcess:
    """A real `agentctl device` in its own process, so a test can SIGKILL it."""

    def __init__(
        self, ep: StackEndpoints, tenant: str, device_id: str, workspace: Path, log: Path
    ) -> None:
        self.env = {**os.environ, **ep.env(), "AGENT_TENANT_ID": tenant}
        self.args = [str(AGENTCTL), "device", "--device-id", device_id, "--workspace"]
        self.args.append(str(workspace))
        self.tenant, self.device_id, self.log = tenant, device_id, log
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None

    def start(self) -> None:
        self.proc = spawn_agentctl(self.args[1:], env=self.env, log=self.log)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no last heartbeat, exactly like a laptop lid closing."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> int | None:
        """SIGTERM, as a user's Ctrl-C would; returns the exit code."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            raise

    async def wait_serving(self, res: Resources, within: float = 30) -> None:
        """Until the worker polls its queue, registered and online."""
        async with asyncio.timeout(within):
            while "device worker for" not in self.log.read_text(errors="replace"):
                if self.proc is None or self.proc.poll() is not None:
                    raise RuntimeError(f"device exited early:\n{self.log.read_text()[-2000:]}")
                await asyncio.sleep(0.1)
        async with agent_state(res.sessions, self.tenant) as st:
            if not await st.devices.is_online(self.device_id):
                raise RuntimeError(f"device {self.device_id} serves but is not online")


def as_in_a_terminal() -> None:
    """A child's SIGINT as a terminal's foreground process gets it (a Popen preexec_fn): a
    suite run as a background job (`make test &`) ignores SIGINT, and a child told to stop
    by Ctrl-C, rightly, leaves an ignored signal ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
