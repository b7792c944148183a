"""`agentctl watch` through the gateway, as a person on another machine runs it: a process
holding only AGENT_GATEWAY_URL and AGENT_API_KEY (no database, S3 or Temporal settings),
against the real gateway on the real stack."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, make_key, poll
from tests.support.helpers import items_of
from tests.support.tcp_proxy import tcp_proxy

AGENTCTL = Path(sys.executable).parent / "agentctl"
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    {"text": "done"},
]
ITEM_LINE = re.compile(r"^#(\d+)\s")
ROOT = Path(__file__).resolve().parents[1]
GATEWAY_DOC = ROOT / "docs" / "gateway.md"


@pytest.fixture
async def gateway(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
) -> AsyncIterator[str]:
    """The URL of a real gateway (uvicorn on loopback) with a cloud worker behind it."""
    async with agent_worker(ScriptedProvider.from_data(SCRIPT), workspace) as queue:
        settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
        settings.gateway = GatewaySettings(rate_per_second=1000, burst=1000)
        async with serving(create_app(resources, client, settings)) as url:
            yield url


async def watch(url: str, key: str | None, *args: str) -> asyncio.subprocess.Process:
    """`agentctl watch` with nothing in its environment but the gateway's URL and a key."""
    env = {"AGENT_GATEWAY_URL": url} | ({"AGENT_API_KEY": key} if key is not None else {})
    return await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        "watch",
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def start_session(http: httpx.AsyncClient) -> str:
    started = await http.post("/v1/sessions", json={"text": "Survey the workspace."})
    assert started.status_code in (200, 201), started.text
    return str(started.json()["session_id"])


async def test_watch_through_the_gateway_prints_every_item_once_across_a_dropped_connection(
    gateway: str, resources: Resources, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read", "start", "approve")
    async with (
        httpx.AsyncClient(base_url=gateway, headers=bearer(key), timeout=30) as http,
        tcp_proxy(gateway) as (proxy, proxied),
    ):
        sid = await start_session(http)
        proc = await watch(proxied, key, sid)
        assert proc.stdout is not None and proc.stderr is not None
        before: list[str] = []
        async with asyncio.timeout(60):  # lines arrive as items commit: the watch flushes
            while "write_file(" not in (line := (await proc.stdout.readline()).decode()):
                assert line, f"watch ended early: {before} {await proc.stderr.read()!r}"
                before.append(line)
            before.append(line)
        inbox = await poll(lambda: http.get("/v1/approvals"), lambda r: bool(r.json()["entries"]))
        assert proxy.drop() >= 2, "the watch's stream was open through the proxy"
        call = inbox.json()["entries"][0]["pending"][0]["tool_call_id"]
        decided = await http.post(f"/v1/sessions/{sid}/calls/{call}/approve", json={})
        assert decided.status_code == 200, decided.text
        async with asyncio.timeout(60):
            rest, err = await proc.communicate()
    out = "".join(before) + rest.decode()
    assert proc.returncode == 0, (out, err.decode())
    printed = [int(m.group(1)) for line in out.splitlines() if (m := ITEM_LINE.match(line))]
    committed = [i.ordinal for i in await items_of(resources, tenant, sid)]
    assert printed == committed == list(range(1, len(committed) + 1)), out
    assert printed[-1] > int(ITEM_LINE.match(before[-1]).group(1))  # type: ignore[union-attr]
    assert out.splitlines()[-1] == "task ended: completed (unchecked)"
    assert proxy.connections >= 2 and "reconnecting" in err.decode()
    assert key.split("_", 2)[2] not in out + err.decode()


async def test_watch_through_the_gateway_refuses_bad_keys_and_other_tenants_sessions(
    gateway: str, resources: Resources, tenant: str
) -> None:
    owner = await make_key(resources, tenant, "read", "start")
    starter = await make_key(resources, tenant, "start")
    stranger = await make_key(resources, f"{tenant}-other", "read")
    async with httpx.AsyncClient(base_url=gateway, headers=bearer(owner), timeout=30) as http:
        sid = await start_session(http)
    cases = {
        "da_nokey_notasecret": "the gateway refused the API key (401",
        starter: "the API key may not read sessions (403",
        stranger: f"no session {sid} for this API key's tenant (404)",
    }
    for key, message in cases.items():
        proc = await watch(gateway, key, sid)
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        assert proc.returncode == 1, (out, err)
        (line,) = err.decode().splitlines()
        assert line.startswith("error: ") and message in line, line
        assert out == b""
    proc = await watch(gateway, None, sid)
    async with asyncio.timeout(60):
        _, err = await proc.communicate()
    assert proc.returncode == 1 and "set AGENT_API_KEY" in err.decode()


async def test_watch_names_an_unreachable_gateway_in_one_line() -> None:
    sock_url = "http://127.0.0.1:9"  # discard: nothing listens there
    proc = await watch(sock_url, "da_x_y", "6f1e0bb4-53a4-4d2f-9d1a-6b7d8b3d7d11")
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 1 and out == b""
    assert err.decode() == (
        "error: cannot reach the gateway at http://127.0.0.1:9 (All connection attempts "
        "failed); is it up? Check AGENT_GATEWAY_URL or --gateway\n"
    )


def documented_blocks() -> list[str]:
    """The sh blocks of docs/gateway.md's "Watch from another machine"."""
    section = GATEWAY_DOC.read_text().split("## Watch from another machine", 1)[1]
    section = re.split(r"\n##+ ", section, maxsplit=1)[0]  # up to the next heading
    return re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)


async def bash(script: str, env: dict[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-euc",
        script,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 0, (script, out.decode(), err.decode())
    return out.decode()


async def test_the_documented_commands_to_watch_from_another_machine_run_as_written(
    gateway: str, migrated: StackEndpoints, resources: Resources
) -> None:
    operator, other = documented_blocks()
    starter = await make_key(resources, "default", "read", "start", "approve")
    async with httpx.AsyncClient(base_url=gateway, headers=bearer(starter), timeout=30) as http:
        sid = await start_session(http)

        def waiting(r: httpx.Response) -> list[dict[str, Any]]:
            return [e for e in r.json()["entries"] if e["session"]["id"] == sid]

        inbox = await poll(lambda: http.get("/v1/approvals"), lambda r: bool(waiting(r)))
        (entry,) = waiting(inbox)
        call = entry["pending"][0]["tool_call_id"]
        await http.post(f"/v1/sessions/{sid}/calls/{call}/approve", json={})
        await poll(
            lambda: http.get(f"/v1/sessions/{sid}"),
            lambda r: r.json()["session"]["status"] == "completed",
        )
    # The operator's block, where the database settings are.
    key = (await bash(operator + 'echo "$K"\n', {**os.environ, **migrated.env()})).strip()
    assert key.startswith("da_")
    # The other machine's: PATH, the key and the session id; the URL is the test gateway's.
    assert "http://127.0.0.1:8000" in other
    script = other.replace("http://127.0.0.1:8000", gateway)
    out = await bash(script, {"PATH": os.environ["PATH"], "K": key, "S": sid})
    printed = [int(m.group(1)) for line in out.splitlines() if (m := ITEM_LINE.match(line))]
    committed = [i.ordinal for i in await items_of(resources, "default", sid)]
    assert printed == committed and out.splitlines()[-1] == "task ended: completed (unchecked)"


@pytest.mark.parametrize(
    ("url", "key", "extra", "message"),
    [
        ("ftp://gw", "da_x_y", [], "AGENT_GATEWAY_URL must be an http(s):// URL of the gateway"),
        ("http://127.0.0.1:9", "da_x y", [], "AGENT_API_KEY is not an API key"),
        ("http://127.0.0.1:9", "da_x_y", ["--tenant", "t"], "--tenant does not apply"),
    ],
)
async def test_watch_refuses_bad_gateway_settings_before_connecting(
    url: str, key: str, extra: list[str], message: str
) -> None:
    proc = await watch(url, key, "6f1e0bb4-53a4-4d2f-9d1a-6b7d8b3d7d11", *extra)
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 1 and out == b""
    assert err.decode().startswith("error: ") and message in err.decode()
    assert "da_x" not in err.decode()  # the key is never echoed
