"""GET /v1/artifacts/{id} hands out the raw bytes whatever the stored form: a redirect to the
store for a raw object, the decoded bytes streamed by the gateway for a compressed one."""

from __future__ import annotations

import hashlib

import httpx
from temporalio.client import Client

from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, gateway_http, make_key

TEXT = b"".join(b"line %06d of a report the agent wrote\n" % i for i in range(40_000))


async def _stored(res: Resources, tenant: str, data: bytes, *, compress: bool) -> str:
    s = res.store
    store = ArtifactStore(s.client, s.bucket, s.prefix, compress=compress)
    ref = await store.put(tenant, data, "text/plain")
    async with res.sessions() as db, db.begin():
        return str(await register_uploaded(db, store, ref, data))


async def test_download_of_a_compressed_artifact_is_its_raw_bytes(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    artifact_id = await _stored(resources, tenant, TEXT, compress=True)
    key = await make_key(resources, tenant, "read")
    async with gateway_http(migrated, resources, client) as http:
        got = await http.get(f"/v1/artifacts/{artifact_id}", headers=bearer(key))
        link = (await http.get(f"/v1/artifacts/{artifact_id}/link", headers=bearer(key))).json()

    assert got.status_code == 200, got.text
    assert got.headers.get("content-encoding") is None  # decoded here, not by the client
    assert got.headers["Cache-Control"] == "no-store"
    assert int(got.headers["Content-Length"]) == len(TEXT)
    assert got.content == TEXT
    assert hashlib.sha256(got.content).hexdigest() == got.headers["X-Artifact-SHA256"]
    # The presigned link of a compressed object says what it serves.
    assert link["content_encoding"] == "zstd" and link["size_bytes"] == len(TEXT)


async def test_download_of_a_raw_artifact_still_redirects_to_the_store(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    artifact_id = await _stored(resources, tenant, TEXT, compress=False)
    key = await make_key(resources, tenant, "read")
    async with gateway_http(migrated, resources, client) as http:
        redirect = await http.get(f"/v1/artifacts/{artifact_id}", headers=bearer(key))
        link = (await http.get(f"/v1/artifacts/{artifact_id}/link", headers=bearer(key))).json()

    assert redirect.status_code == 307
    async with httpx.AsyncClient() as plain:
        body = (await plain.get(redirect.headers["Location"])).content
    assert hashlib.sha256(body).hexdigest() == redirect.headers["X-Artifact-SHA256"]
    assert body == TEXT and link["content_encoding"] is None
