"""A real `agentctl gateway` process on a loopback port, so a test (or a bench) can run
two of them and SIGKILL one."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx

from tests.support.mcp import free_port
from tests.support.processes import AGENTCTL, REPO


class GatewayProcess:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # PYTHONPATH: this checkout's modules, whichever one the venv was installed from.
        self.env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, within: float = 60) -> None:
        """Start it and wait until /healthz answers."""
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                str(AGENTCTL),
                "gateway",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                env=self.env,
                cwd=REPO,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
        async with httpx.AsyncClient(base_url=self.url) as http, asyncio.timeout(within):
            while True:
                if self.proc.returncode is not None:
                    raise RuntimeError(f"gateway exited early:\n{self.log.read_text()[-3000:]}")
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    await asyncio.sleep(0.1)

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    async def kill(self) -> None:
        """SIGKILL: no shutdown, no last answer; its open connections just break."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(30):
                await self.proc.wait()
        except TimeoutError:
            await self.kill()
