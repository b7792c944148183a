"""Reading artifacts without holding them whole: ranged reads, streamed reads verified at the
end, and short-lived presigned URLs for other devices."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from durable_agents.storage.errors import ArtifactIntegrityError, ArtifactNotFound
from durable_agents.workers.resources import Resources
from tests.support.large_objects import MiB, blocks, raw_client, spied, stream


async def test_get_range_returns_exact_slices_and_validates_the_range(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = b"".join(blocks(17 * MiB, tenant))
    ref = await store.put_stream(tenant, stream(len(data), tenant))
    last = len(data) - 1
    boundary = 8 * MiB  # a slice across the first part boundary

    for start, end in [(0, 0), (0, 99), (last, last), (boundary - 10, boundary + 10), (0, last)]:
        assert await store.get_range(tenant, ref, start, end) == data[start : end + 1]
    for start, end in [(-1, 5), (5, 4), (0, len(data)), (len(data), len(data))]:
        with pytest.raises(ValueError, match="not within"):
            await store.get_range(tenant, ref, start, end)
    with pytest.raises(ArtifactNotFound):
        await store.get_range(f"{tenant}-other", ref, 0, 0)


async def test_iter_chunks_raises_after_the_last_chunk_of_a_corrupted_object(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = os.urandom(3 * MiB + 5)
    ref = await store.put(tenant, data)
    await raw_client(store).put_object(Bucket=store.bucket, Key=ref.key, Body=os.urandom(len(data)))

    received: list[bytes] = []
    with pytest.raises(ArtifactIntegrityError):
        async for chunk in store.iter_chunks(tenant, ref, MiB):
            received.append(chunk)

    assert [len(c) for c in received] == [MiB, MiB, MiB, 5]


async def test_iter_chunks_checks_tenant_before_any_request(
    resources: Resources, tenant: str
) -> None:
    store, spy = spied(resources.store)
    ref = await resources.store.put(tenant, os.urandom(64))

    with pytest.raises(ArtifactNotFound):
        store.iter_chunks(f"{tenant}-other", ref)
    with pytest.raises(ArtifactNotFound):
        store.iter_chunks(f"{tenant}-other", dataclasses.replace(ref, tenant_id=f"{tenant}-other"))
    missing = store.ref_for(tenant, hashlib.sha256(b"absent").hexdigest(), 6, "text/plain")
    with pytest.raises(ArtifactNotFound):
        async for _ in store.iter_chunks(tenant, missing):
            pass
    assert spy.calls == ["get_object"]


async def test_presigned_url_downloads_without_credentials_and_rejects_tampering(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = os.urandom(300_000)
    ref = await store.put(tenant, data)

    url = await store.presigned_url(tenant, ref, expires_in=60)
    short = await store.presigned_url(tenant, ref, expires_in=1)
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    sig_name = "X-Amz-Signature" if "X-Amz-Signature" in query else "Signature"
    sig = query[sig_name]
    query[sig_name] = ("A" if sig[0] != "A" else "B") + sig[1:]
    tampered = urlunsplit(parts._replace(query=urlencode(query)))
    async with httpx.AsyncClient() as http:
        ok = await http.get(url)
        forged = await http.get(tampered)
        await asyncio.sleep(2.1)
        expired = await http.get(short)

    assert ok.status_code == 200
    assert hashlib.sha256(ok.content).hexdigest() == ref.sha256
    assert forged.status_code == 403
    assert expired.status_code == 403


async def test_presigned_url_refuses_long_expiry_and_other_tenants(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    ref = await store.put(tenant, os.urandom(32))

    for expires_in in (0, 3601):
        with pytest.raises(ValueError, match="expires_in"):
            await store.presigned_url(tenant, ref, expires_in=expires_in)
    assert await store.presigned_url(tenant, ref, expires_in=3600)
    with pytest.raises(ArtifactNotFound):
        await store.presigned_url(f"{tenant}-other", ref)
    with pytest.raises(ArtifactNotFound):
        await store.presigned_url(
            f"{tenant}-other", dataclasses.replace(ref, tenant_id=f"{tenant}-other")
        )
