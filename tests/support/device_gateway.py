"""A real gateway over loopback HTTP (workers.gateway.serving, in the test's loop) and a real
`agentctl device` that reaches it with a device key and nothing else."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from temporalio.client import Client

from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer
from tests.support.gateway import gateway_server as served_gateway
from tests.support.processes import AGENTCTL, REPO

# What a device process may see of the machine: no DATABASE_*, S3_*, TEMPORAL_* at all.
_PASSED = ("PATH", "HOME", "LANG", "TMPDIR")


async def make_device_key(res: Resources, tenant: str, device_id: str) -> str:
    """A new device key's full text."""
    async with res.sessions() as db, db.begin():
        return (await ApiKeyRepository(db).create_device_key(tenant, device_id)).key


@asynccontextmanager
async def gateway_server(
    stack: StackEndpoints, res: Resources, client: Client
) -> AsyncIterator[str]:
    """The gateway app served on a loopback port (lifespan included, so its relays stop
    with it); yields its base URL."""
    async with served_gateway(stack, res, client, queue="unused", workspace=Path("unused")) as url:
        yield url


@dataclass(frozen=True)
class DeviceLink:
    """A device speaking HTTP to a real gateway with its key: what a test drives by hand."""

    http: httpx.AsyncClient
    auth: dict[str, str]
    device_id: str


@asynccontextmanager
async def device_link(
    stack: StackEndpoints, res: Resources, client: Client, tenant: str, tools: list[str]
) -> AsyncIterator[DeviceLink]:
    """A new device of `tenant` with its own key, registered with `tools` on a fresh
    gateway served for the block."""
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    auth = bearer(await make_device_key(res, tenant, device_id))
    async with (
        gateway_server(stack, res, client) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        registered = await http.post("/v1/device", json={"tools": tools}, headers=auth)
        assert registered.status_code == 200, registered.text
        yield DeviceLink(http, auth, device_id)


class GatewayDeviceProcess:
    """`agentctl device` in gateway mode, in its own process (so a test can SIGKILL it),
    with an environment holding the gateway URL and the device key only."""

    def __init__(self, url: str, key: str, workspace: Path, log: Path) -> None:
        self.env = {name: os.environ[name] for name in _PASSED if name in os.environ}
        self.env.update(AGENT_GATEWAY_URL=url, AGENT_DEVICE_KEY=key, PYTHONPATH=str(REPO))
        self.args = [str(AGENTCTL), "device", "--workspace", str(workspace)]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            # A session of its own: kill() takes its MCP servers down with it.
            self.proc = subprocess.Popen(
                self.args,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                start_new_session=True,
            )

    async def wait_serving(self, within: float = 30) -> None:
        """Until it registered through the gateway and polls."""
        async with asyncio.timeout(within):
            while "device link for" not in self.log.read_text(errors="replace"):
                if self.proc is None or self.proc.poll() is not None:
                    raise RuntimeError(f"device exited early:\n{self.log.read_text()[-3000:]}")
                await asyncio.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no last completion, no lease renewal, like a laptop lid closing."""
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
