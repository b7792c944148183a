"""`agentctl gateway` serves the app with uvicorn over real HTTP: the OpenAPI schema, keys from
`agentctl keys`, and a clean stop on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, make_key
from tests.support.mcp import free_port

AGENTCTL = Path(sys.executable).parent / "agentctl"


async def test_agentctl_gateway_serves_the_api_and_its_docs_on_loopback(
    migrated: StackEndpoints, resources: Resources, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read", user="erin")
    port = free_port()
    env = {**os.environ, **migrated.env(), "AGENT_TENANT_ID": "nobody"}
    proc = await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        "gateway",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base) as http:
            async with asyncio.timeout(30):
                while True:
                    try:
                        if (await http.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
            me = await http.get("/v1/me", headers=bearer(key))
            anonymous = await http.get("/v1/sessions")
            spec = (await http.get("/openapi.json")).json()
            docs = await http.get("/docs")
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            out, err = await proc.communicate()
    assert me.status_code == 200
    assert me.json() == {
        "key_id": key.split("_")[1],
        "tenant_id": tenant,
        "user_id": "erin",
        "scopes": ["read"],
    }
    assert anonymous.status_code == 401
    assert {"/v1/sessions", "/v1/approvals", "/v1/artifacts/{artifact_id}"} <= set(spec["paths"])
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    assert docs.status_code == 404  # no HTML docs: their scripts come from a CDN
    assert f"gateway on http://127.0.0.1:{port}" in out.decode()
    # A graceful stop; uvicorn then re-raises the SIGTERM it caught, as a service should.
    assert "Application shutdown complete" in err.decode(), err.decode()[-2000:]
    assert proc.returncode in (0, -signal.SIGTERM)
    assert key.split("_", 2)[2] not in (out + err).decode()  # the secret is never logged
