"""A real cloud worker in its own process, so a test can SIGKILL it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from workers.stack import StackEndpoints

AGENTCTL = Path(sys.executable).parent / "agentctl"


class WorkerProcess:
    def __init__(
        self,
        ep: StackEndpoints,
        *,
        queue: str,
        workspace: Path,
        script: list[dict[str, Any]],
        log: Path,
    ) -> None:
        script_path = log.with_suffix(".script.json")
        script_path.write_text(json.dumps(script))
        self.env = {
            **os.environ,
            **ep.env(),
            "MODEL_PROVIDER": "scripted",
            "MODEL_SCRIPT_PATH": str(script_path),
            "AGENT_WORKSPACE": str(workspace),
            "AGENT_TASK_QUEUE": queue,
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(AGENTCTL), "worker"], env=self.env, stdout=out, stderr=subprocess.STDOUT
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

    def wait_started(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log.read_text()[-2000:]}")
            if "cloud worker on" in self.log.read_text():
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker did not start:\n{self.log.read_text()[-2000:]}")
