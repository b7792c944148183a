"""Artifacts stored zstd-compressed: raw sha256 and size, reads of every kind decode by
streaming, dedup across stored forms, and a corrupted or bomb object refused."""

from __future__ import annotations

import hashlib
import tracemalloc
from typing import Any

import pytest
import zstandard

from durable_agents.storage import artifact_codec as codec
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.errors import ArtifactIntegrityError
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.workers.resources import Resources
from tests.support.helpers import s3_keys
from tests.test_read_artifact import call, ctx, held, new_session

MiB = 1024 * 1024
# ~3.3 MiB of log-like text: four frames, compressing to a few percent.
TEXT = b"".join(
    b"%07d GET /api/items/%d 200 in %d ms\n" % (i, i % 977, i % 53) for i in range(90_000)
)


def store_of(res: Resources, *, compress: bool) -> ArtifactStore:
    """Another writer on the same bucket: compress=False writes objects as they were before."""
    s = res.store
    return ArtifactStore(s.client, s.bucket, s.prefix, compress=compress)


async def head(store: ArtifactStore, ref: ArtifactRef) -> dict[str, Any]:
    found: dict[str, Any] = await store.client.head_object(Bucket=store.bucket, Key=ref.key)
    return found


async def read_all_ways(store: ArtifactStore, tenant: str, ref: ArtifactRef, data: bytes) -> None:
    assert await store.get(tenant, ref) == data
    assert b"".join([c async for c in store.iter_chunks(tenant, ref, 300_000)]) == data
    last = len(data) - 1
    # Offsets inside the stored (compressed) size and past it: both find the right frames.
    slices = [(0, 0), (0, 99), (0, 200_000), (1_000, 5_000), (MiB - 10, MiB + 10), (last, last)]
    for start, end in slices:
        assert await store.get_range(tenant, ref, start, end) == data[start : end + 1]
    assert await store.get_range(tenant, ref, 0, last) == data
    assert (
        await store.get_range(tenant, ref, 2 * MiB + 7, 3 * MiB) == data[2 * MiB + 7 : 3 * MiB + 1]
    )


@pytest.mark.parametrize("compress", [True, False], ids=["compressed", "raw-as-before"])
async def test_every_read_returns_the_raw_bytes_whether_stored_compressed_or_not(
    resources: Resources, tenant: str, compress: bool
) -> None:
    store = store_of(resources, compress=compress)
    ref = await store.put(tenant, TEXT, "text/plain")

    assert (ref.sha256, ref.size_bytes) == (hashlib.sha256(TEXT).hexdigest(), len(TEXT))
    stored = await head(store, ref)
    if compress:
        assert stored.get("ContentEncoding") == "zstd"
        assert stored["ContentLength"] < len(TEXT) // 5
        assert stored["Metadata"]["raw-size"] == str(len(TEXT))
    else:
        assert stored.get("ContentEncoding") is None and stored["ContentLength"] == len(TEXT)
    # Reads go through the default store, as every reader does: it learns the form from S3.
    await read_all_ways(resources.store, tenant, ref, TEXT)
    assert await resources.store.stored_encoding(tenant, ref) == ("zstd" if compress else None)


async def test_grep_finds_matches_in_every_frame_of_a_compressed_result(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    _, sha = await held(resources, tenant, sid, TEXT)
    ref = resources.store.ref_for(tenant, sha, len(TEXT), "text/plain")
    assert await resources.store.stored_encoding(tenant, ref) == "zstd"

    text = await call(
        ctx(resources, tenant, sid), artifact=sha[:12], pattern=r"^00(00010|45000|89999) "
    )

    header, *found = text.splitlines()
    assert "3 of 90000 lines match" in header
    assert [int(f.split(" ", 1)[0]) for f in found] == [11, 45001, 90000]


async def test_incompressible_and_tiny_content_is_stored_raw() -> None:
    random_like = hashlib.shake_256(b"seed").digest(300_000)
    assert codec.compress_if_smaller(random_like) is None
    assert codec.compress_if_smaller(b"a" * (codec.MIN_COMPRESS_BYTES - 1)) is None
    packed = codec.compress_if_smaller(b"a" * 5000)
    assert packed is not None and codec.decompress(packed.body, 5000) == b"a" * 5000


@pytest.mark.parametrize("first_compressed", [True, False], ids=["compressed-first", "raw-first"])
async def test_same_raw_bytes_dedup_to_one_object_whichever_form_came_first(
    resources: Resources, tenant: str, first_compressed: bool
) -> None:
    first = store_of(resources, compress=first_compressed)
    second = store_of(resources, compress=not first_compressed)

    a = await first.put(tenant, TEXT, "text/plain")
    before = await head(first, a)
    b = await second.put(tenant, TEXT, "text/plain")  # verified against the other form

    assert a == b
    assert await s3_keys(resources, f"{first.prefix}/{tenant}/") == [a.key]
    assert (await head(first, b))["ETag"] == before["ETag"]  # the first object stays
    await read_all_ways(resources.store, tenant, b, TEXT)


async def test_a_corrupted_compressed_object_is_refused_on_read_and_on_re_upload(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    ref = await store.put(tenant, TEXT, "text/plain")
    meta = (await head(store, ref))["Metadata"]
    # Valid zstd frames with the same table shape, decoding to other bytes of the same size.
    other = bytearray(TEXT)
    other[123_456] ^= 1
    forged = codec.compress_if_smaller(bytes(other))
    assert forged is not None
    forged_args = codec.put_arguments(forged, len(TEXT))
    forged_args["Metadata"]["sha256"] = ref.sha256  # the claim stays; only the bytes differ
    await store.client.put_object(Bucket=store.bucket, Key=ref.key, Body=forged.body, **forged_args)

    with pytest.raises(ArtifactIntegrityError):
        await store.get(tenant, ref)
    with pytest.raises(ArtifactIntegrityError):
        async for _ in store.iter_chunks(tenant, ref):
            pass
    with pytest.raises(ArtifactIntegrityError):  # dedup must not vouch for the wrong bytes
        await store.put(tenant, TEXT, "text/plain")

    # Bytes that are not zstd at all.
    await store.client.put_object(
        Bucket=store.bucket, Key=ref.key, Body=b"\x00" * 5000, ContentEncoding="zstd", Metadata=meta
    )
    with pytest.raises(ArtifactIntegrityError):
        await store.get(tenant, ref)
    with pytest.raises(ArtifactIntegrityError):
        await store.get_range(tenant, ref, 0, 99)


async def test_a_zstd_bomb_is_refused_without_decoding_it_into_memory(
    resources: Resources, tenant: str
) -> None:
    """An object that lies about its size — 256 MiB of zeros in a few KB — under the key of
    a 3 MB artifact: decoding stops at the recorded raw size, memory stays small."""
    store = resources.store
    ref = await store.put(tenant, TEXT, "text/plain")
    bomb = zstandard.ZstdCompressor(level=3).compress(b"\x00" * (256 * MiB))
    assert len(bomb) < 64 * 1024
    await store.client.put_object(
        Bucket=store.bucket,
        Key=ref.key,
        Body=bomb,
        ContentEncoding="zstd",
        Metadata={"encoding": "zstd", "frame-size": str(256 * MiB), "frames": str(len(bomb))},
    )

    tracemalloc.start()
    try:
        with pytest.raises(ArtifactIntegrityError, match="more than"):
            await store.get(tenant, ref)
        with pytest.raises(ArtifactIntegrityError, match="more than"):
            async for _ in store.iter_chunks(tenant, ref):
                pass
        with pytest.raises(ArtifactIntegrityError):
            await store.put(tenant, TEXT, "text/plain")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(TEXT)  # bounded by the raw size, not the bomb's 256 MiB


async def test_streaming_a_highly_compressible_object_holds_about_a_frame(
    resources: Resources, tenant: str
) -> None:
    """64 MiB that compress to a few KB: a streamed read decodes frame by frame, so memory
    stays near one frame (1 MiB) plus one chunk, not the object."""
    store = resources.store
    data = b"".join(i.to_bytes(4, "big") + bytes(MiB - 4) for i in range(64))
    ref = await store.put(tenant, data, "application/octet-stream")
    assert (await head(store, ref))["ContentLength"] < 64 * 1024
    digest, size = hashlib.sha256(), 0

    tracemalloc.start()
    try:
        async for chunk in store.iter_chunks(tenant, ref, MiB):
            digest.update(chunk)
            size += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert (size, digest.hexdigest()) == (len(data), ref.sha256)
    assert peak < 8 * MiB, f"peak {peak / MiB:.1f} MiB"
