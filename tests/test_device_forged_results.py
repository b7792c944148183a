"""A device's completion is believed only after the gateway read the uploaded object back:
a wrong sha256 or size, or nothing uploaded, is refused (422), commits nothing and offers
the call again; the right one commits once. The upload URL is bound to its call's key."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import gateway_server, make_device_key
from tests.support.gateway import bearer
from tests.support.helpers import items_of, start

READ_ON_DEVICE = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "done"},
]
REAL = b"what the file really says"


def _claim(body: bytes, size: int | None = None) -> dict[str, Any]:
    sha = hashlib.sha256(body).hexdigest()
    size = len(body) if size is None else size
    return {"result": {"size_bytes": size, "sha256": sha, "content_type": "text/plain"}}


async def test_a_forged_completion_is_refused_never_committed_and_the_call_offered_again(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    key = await make_device_key(resources, tenant, device_id)
    auth = bearer(key)
    provider = ScriptedProvider.from_data(READ_ON_DEVICE)
    async with (
        agent_worker(provider, workspace) as queue,
        gateway_server(migrated, resources, client) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        registered = await http.post("/v1/device", json={"tools": ["read_file"]}, headers=auth)
        assert registered.status_code == 200
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, device_id=device_id, device_tools=["read_file"]
        )

        async def offer() -> dict[str, Any]:
            got = await http.post("/v1/device/calls/next", params={"wait": 20}, headers=auth)
            assert got.status_code == 200, got.text
            call: dict[str, Any] = got.json()
            return call

        async def complete(cid: str, body: dict[str, Any]) -> httpx.Response:
            return await http.post(f"/v1/device/calls/{cid}/complete", json=body, headers=auth)

        async def results() -> list[Any]:
            items = await items_of(resources, tenant, session_id)
            return [i for i in items if i.kind == "tool_result"]

        first = await offer()
        cid = first["call_id"]
        assert first["offered_before"] is False
        # Nothing uploaded yet.
        missing = await complete(cid, _claim(REAL))
        assert missing.status_code == 422 and missing.json()["error"]["type"] == "result_refused"

        # Bound to this call's key: the same signature for another key is refused by S3.
        forged_url = first["upload"]["url"].replace(cid, str(uuid.uuid4()))
        assert (await http.put(forged_url, content=REAL)).status_code == 403

        # Other bytes of the same size than claimed: refused, nothing committed, offered again.
        again = await offer()
        assert again["call_id"] == cid and again["offered_before"] is True
        assert (await http.put(again["upload"]["url"], content=b"F" * len(REAL))).status_code == 200
        forged = await complete(cid, _claim(REAL))
        assert forged.status_code == 422, forged.text
        assert "sha256" in forged.json()["error"]["message"]
        assert await results() == []

        # The right bytes but a wrong size claimed: refused too.
        third = await offer()
        assert (await http.put(third["upload"]["url"], content=REAL)).status_code == 200
        wrong_size = await complete(cid, _claim(REAL, size=len(REAL) + 1))
        assert wrong_size.status_code == 422, wrong_size.text
        assert await results() == []

        await offer()
        # A target bound to the sha256 as well: S3 itself refuses other bytes.
        sha = hashlib.sha256(REAL).hexdigest()
        bound = await http.post(
            f"/v1/device/calls/{cid}/upload", json={"sha256": sha}, headers=auth
        )
        assert bound.status_code == 200, bound.text
        target = bound.json()
        forged_body = b"F" * len(REAL)
        refused = await http.put(target["url"], content=forged_body, headers=target["headers"])
        assert refused.status_code == 400 and "BadDigest" in refused.text
        unsigned = await http.put(target["url"], content=REAL)  # the checksum header left out
        assert unsigned.status_code == 403
        put = await http.put(target["url"], content=REAL, headers=target["headers"])
        assert put.status_code == 200
        done = await complete(cid, _claim(REAL))
        assert done.status_code == 200 and done.json()["status"] == "committed", done.text
        # Completing again changes nothing.
        twice = await complete(cid, _claim(REAL))
        assert twice.status_code == 200 and twice.json()["status"] == "already_committed"
        result = await handle.result()
    assert result.status == "completed"
    (committed,) = await results()
    assert committed.data["artifact"]["sha256"] == hashlib.sha256(REAL).hexdigest()
    assert committed.data["artifact"]["size_bytes"] == len(REAL)
