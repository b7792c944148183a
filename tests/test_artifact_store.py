"""The content-addressed ArtifactStore against a real S3 (SeaweedFS): keys, dedup, integrity."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import os
from typing import Any

import pytest
from botocore.exceptions import ClientError

from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.errors import ArtifactIntegrityError, ArtifactNotFound, InvalidTenant
from durable_agents.workers.resources import Resources
from tests.support.helpers import s3_keys, s3_sha256
from tests.support.large_objects import spied


def _raw(store: ArtifactStore) -> Any:
    return store.client  # the test talks to the bucket as any other S3 client would


def _status(err: ClientError) -> int:
    return int(err.response["ResponseMetadata"]["HTTPStatusCode"])


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


async def test_put_returns_ref_at_content_addressed_key(resources: Resources, tenant: str) -> None:
    store = resources.store
    data = b"hello artifact " + os.urandom(16)
    sha = hashlib.sha256(data).hexdigest()

    ref = await store.put(tenant, data, "text/plain")

    assert ref.key == f"{store.prefix}/{tenant}/sha256/{sha[:2]}/{sha[2:4]}/{sha}"
    assert (ref.tenant_id, ref.sha256, ref.size_bytes, ref.content_type) == (
        tenant,
        sha,
        len(data),
        "text/plain",
    )
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == [ref.key]
    assert await s3_sha256(resources, ref.key) == sha
    # Uploaded with ChecksumSHA256, so the server itself vouches for the bytes.
    head = await _raw(store).head_object(Bucket=store.bucket, Key=ref.key, ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == _b64_sha256(data)
    assert await store.get(tenant, ref) == data


async def test_putting_same_bytes_twice_leaves_the_first_object_untouched(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = os.urandom(2048)
    first = await store.put(tenant, data)
    before = await _raw(store).head_object(Bucket=store.bucket, Key=first.key)

    await asyncio.sleep(1.1)  # LastModified has one-second resolution: a rewrite would show
    second = await store.put(tenant, data)
    after = await _raw(store).head_object(Bucket=store.bucket, Key=second.key)

    assert second == first
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == [first.key]
    assert after["LastModified"] == before["LastModified"]
    assert after["ETag"] == before["ETag"]


async def test_server_refuses_conditional_create_over_an_existing_key(
    resources: Resources, tenant: str
) -> None:
    """The store's dedup relies on IfNoneMatch='*' being enforced (412), not ignored."""
    store = resources.store
    ref = await store.put(tenant, os.urandom(64))

    with pytest.raises(ClientError) as info:
        await _raw(store).put_object(
            Bucket=store.bucket, Key=ref.key, Body=b"other bytes", IfNoneMatch="*"
        )

    assert _status(info.value) in (409, 412)
    assert await s3_sha256(resources, ref.key) == ref.sha256


async def test_get_of_corrupted_object_raises_integrity_error(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = b"A" * 100
    ref = await store.put(tenant, data)
    # Same length, different bytes, written straight over the key (no conditional header).
    await _raw(store).put_object(Bucket=store.bucket, Key=ref.key, Body=b"B" * 100)

    with pytest.raises(ArtifactIntegrityError):
        await store.get(tenant, ref)


async def test_put_over_a_corrupted_object_refuses_to_return_a_ref(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = os.urandom(100)
    ref = await store.put(tenant, data)
    await _raw(store).put_object(Bucket=store.bucket, Key=ref.key, Body=os.urandom(100))

    with pytest.raises(ArtifactIntegrityError):
        await store.put(tenant, data)


async def test_put_over_corrupted_object_with_forged_sha256_metadata_refuses_a_ref(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = os.urandom(100)
    ref = await store.put(tenant, data)
    await _raw(store).put_object(
        Bucket=store.bucket, Key=ref.key, Body=os.urandom(100), Metadata={"sha256": ref.sha256}
    )

    with pytest.raises(ArtifactIntegrityError):
        await store.put(tenant, data)


async def test_get_with_another_tenants_ref_looks_like_a_missing_object(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    ref = await store.put(tenant, os.urandom(32))
    other = f"{tenant}-other"

    with pytest.raises(ArtifactNotFound) as foreign:
        await store.get(other, ref)
    # A ref relabelled with the caller's tenant but still pointing at the owner's key.
    with pytest.raises(ArtifactNotFound) as relabelled:
        await store.get(other, dataclasses.replace(ref, tenant_id=other))
    missing_sha = hashlib.sha256(os.urandom(8)).hexdigest()
    missing = store.ref_for(other, missing_sha, 8, "application/octet-stream")
    with pytest.raises(ArtifactNotFound) as absent:
        await store.get(other, missing)

    assert type(foreign.value) is type(absent.value) is type(relabelled.value)
    assert str(foreign.value) == f"artifact {ref.sha256} not found"
    assert str(absent.value) == f"artifact {missing_sha} not found"


async def test_get_of_missing_object_raises_not_found(resources: Resources, tenant: str) -> None:
    store = resources.store
    sha = hashlib.sha256(os.urandom(8)).hexdigest()

    with pytest.raises(ArtifactNotFound):
        await store.get(tenant, store.ref_for(tenant, sha, 8, "application/octet-stream"))


@pytest.mark.parametrize(
    "bad_tenant", ["../x", "", "a/b", ".hidden", "-dash", "x" * 129, "sp ace", "t\n"]
)
async def test_invalid_tenant_is_rejected_before_any_upload(
    resources: Resources, bad_tenant: str
) -> None:
    store = resources.store
    before = await s3_keys(resources, f"{store.prefix}/")

    with pytest.raises(InvalidTenant):
        await store.put(bad_tenant, b"payload for " + os.urandom(8))
    with pytest.raises(InvalidTenant):
        store.ref_for(bad_tenant, "0" * 64, 1, "text/plain")

    assert sorted(await s3_keys(resources, f"{store.prefix}/")) == sorted(before)
    assert await s3_keys(resources, "../") == []


async def test_server_rejects_body_whose_sha256_checksum_does_not_match(
    resources: Resources, tenant: str
) -> None:
    """put() sends ChecksumSHA256 and relies on the server refusing a mismatching body."""
    store = resources.store
    key = f"{store.prefix}/{tenant}/raw/bad-digest"

    with pytest.raises(ClientError) as info:
        await _raw(store).put_object(
            Bucket=store.bucket,
            Key=key,
            Body=b"the bytes that arrived",
            ChecksumSHA256=_b64_sha256(b"the bytes that were sent"),
        )

    code = info.value.response["Error"]["Code"]
    assert code in ("BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest"), code
    assert _status(info.value) == 400
    assert await s3_keys(resources, key) == []


async def test_server_accepts_body_whose_sha256_checksum_matches(
    resources: Resources, tenant: str
) -> None:
    """Control for the BadDigest test: the same call with a correct checksum succeeds."""
    store = resources.store
    key = f"{store.prefix}/{tenant}/raw/good-digest"
    body = b"the bytes that were sent"

    await _raw(store).put_object(
        Bucket=store.bucket, Key=key, Body=body, ChecksumSHA256=_b64_sha256(body)
    )

    assert await s3_sha256(resources, key) == hashlib.sha256(body).hexdigest()


async def test_a_fresh_put_is_verified_by_the_servers_checksum_check_in_one_call(
    resources: Resources, tenant: str
) -> None:
    store, spy = spied(resources.store)
    data = os.urandom(1000)
    ref = await store.put(tenant, data)
    # The server refused any body not matching ChecksumSHA256 and echoed it: no HEAD needed.
    assert spy.calls == ["put_object"]
    assert await resources.store.get(tenant, ref) == data


async def test_a_server_that_does_not_confirm_the_checksum_gets_the_bytes_checked(
    resources: Resources, tenant: str
) -> None:
    async def careless(real: Any, **kwargs: Any) -> Any:
        # Stores other bytes of the same length and confirms nothing: what a server that
        # ignores ChecksumSHA256 (and a bad disk) would do.
        kwargs.pop("ChecksumSHA256")
        kwargs["Body"] = os.urandom(len(kwargs["Body"]))
        sent = await real(**kwargs)
        sent.pop("ChecksumSHA256", None)
        return sent

    store, spy = spied(resources.store, put_object=careless)
    with pytest.raises(ArtifactIntegrityError, match="does not hash"):
        await store.put(tenant, os.urandom(1000))
    assert spy.calls[:2] == ["put_object", "head_object"]
