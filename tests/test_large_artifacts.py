"""Large artifacts against a real S3 (SeaweedFS): streamed multipart upload with bounded memory,
dedup without re-upload, abort on failure, ranged and streamed reads, presigned URLs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import resource
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from durable_agents.storage.errors import ArtifactIntegrityError, InvalidTenant
from durable_agents.workers.resources import Resources
from tests.support.helpers import s3_keys
from tests.support.large_objects import (
    Hook,
    MiB,
    blocks,
    open_uploads,
    raw_client,
    sha_of,
    spied,
    stream,
)

BIG = 200 * MiB
MEMORY_BUDGET = 64 * MiB  # traced Python allocations, the reliable signal
# Max RSS also counts allocator slack and C buffers, so it only gets a coarse bound: enough
# to catch the object being held whole (200 MiB), not tight enough to be flaky.
RSS_BUDGET = 128 * MiB


def _rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


async def test_200mb_stream_uploads_and_reads_back_with_bounded_memory(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    store = resources.store
    expected = sha_of(BIG, tenant)
    rss_before = _rss_bytes()

    tracemalloc.start()
    began = time.monotonic()
    ref = await store.put_stream(
        tenant, stream(BIG, tenant), "application/x-big", spool_dir=tmp_path
    )
    upload_s = time.monotonic() - began
    upload_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    began = time.monotonic()
    digest, size, chunk_sizes = hashlib.sha256(), 0, set()
    async for chunk in store.iter_chunks(tenant, ref, 4 * MiB):
        digest.update(chunk)
        size += len(chunk)
        chunk_sizes.add(len(chunk))
    download_s = time.monotonic() - began
    download_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss_growth = _rss_bytes() - rss_before

    print(
        f"\n200 MB: put_stream {upload_s:.1f}s (peak {upload_peak / MiB:.1f} MiB traced), "
        f"iter_chunks {download_s:.1f}s (peak {download_peak / MiB:.1f} MiB traced), "
        f"max RSS growth {rss_growth / MiB:.1f} MiB"
    )
    assert (ref.sha256, ref.size_bytes, ref.content_type) == (expected, BIG, "application/x-big")
    assert (digest.hexdigest(), size) == (expected, BIG)
    assert chunk_sizes == {4 * MiB}
    assert upload_peak < MEMORY_BUDGET
    assert download_peak < MEMORY_BUDGET
    assert rss_growth < RSS_BUDGET
    head = await raw_client(store).head_object(
        Bucket=store.bucket, Key=ref.key, ChecksumMode="ENABLED"
    )
    # Multipart (8 MiB parts): the server keeps a composite checksum, the metadata the full sum.
    assert head["ChecksumSHA256"].endswith("-25")
    assert head["Metadata"]["sha256"] == expected
    assert head["ContentType"] == "application/x-big"
    assert os.listdir(tmp_path) == []  # the spool file is gone
    assert await open_uploads(store, tenant) == []


async def test_second_put_stream_of_same_bytes_uploads_nothing(
    resources: Resources, tenant: str
) -> None:
    total = 20 * MiB + 123
    first = await resources.store.put_stream(tenant, stream(total, tenant))
    before = await raw_client(resources.store).head_object(
        Bucket=resources.store.bucket, Key=first.key
    )
    store, spy = spied(resources.store)

    await asyncio.sleep(1.1)  # LastModified has one-second resolution: a rewrite would show
    second = await store.put_stream(tenant, stream(total, tenant))
    after = await raw_client(resources.store).head_object(Bucket=store.bucket, Key=second.key)

    assert second == first
    assert (after["LastModified"], after["ETag"]) == (before["LastModified"], before["ETag"])
    # One HEAD decided it: the composite checksum matched, so no upload and no re-download.
    assert spy.calls == ["head_object"]


async def test_failing_chunk_source_leaves_no_object_and_no_upload(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    store, spy = spied(resources.store)

    with pytest.raises(ConnectionError):
        await store.put_stream(tenant, stream(40 * MiB, tenant, fail_at=25), spool_dir=tmp_path)

    assert spy.calls == []  # nothing is sent before the whole stream is hashed
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == []
    assert await open_uploads(store, tenant) == []
    assert os.listdir(tmp_path) == []


async def test_failure_during_part_upload_aborts_the_multipart_upload(
    resources: Resources, tenant: str
) -> None:
    async def flaky_upload_part(real: Hook, **kwargs: Any) -> Any:
        if kwargs["PartNumber"] == 2:
            raise ConnectionResetError("connection lost mid-part")
        return await real(**kwargs)

    store, spy = spied(resources.store, upload_part=flaky_upload_part)

    with pytest.raises(ConnectionResetError):
        await store.put_stream(tenant, stream(20 * MiB, tenant))

    assert spy.calls[-1] == "abort_multipart_upload"
    assert "complete_multipart_upload" not in spy.calls
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == []
    assert await open_uploads(store, tenant) == []


async def test_put_file_changed_during_upload_is_refused_and_aborted(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"".join(blocks(20 * MiB, tenant)))

    async def tamper_then_upload(real: Hook, **kwargs: Any) -> Any:
        if kwargs["PartNumber"] == 1:
            with path.open("r+b") as f:  # rewrite part 2 after the file was hashed
                f.seek(9 * MiB)
                f.write(b"changed")
        return await real(**kwargs)

    store, spy = spied(resources.store, upload_part=tamper_then_upload)

    with pytest.raises(ArtifactIntegrityError, match="changed"):
        await store.put_file(tenant, path)

    assert spy.calls.count("upload_part") == 1
    assert spy.calls[-1] == "abort_multipart_upload"
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == []
    assert await open_uploads(store, tenant) == []


async def test_concurrent_create_wins_the_conditional_complete(
    resources: Resources, tenant: str
) -> None:
    """Another writer stores the same bytes between our HEAD and our complete: 412, theirs
    stays, our upload is aborted and the ref is still returned (after verifying theirs)."""
    total = 18 * MiB
    data = b"".join(blocks(total, tenant))

    async def other_writer_first(real: Hook, **kwargs: Any) -> Any:
        await resources.store.put(tenant, data)
        return await real(**kwargs)

    store, spy = spied(resources.store, complete_multipart_upload=other_writer_first)
    ref = await store.put_stream(tenant, stream(total, tenant))

    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert "abort_multipart_upload" in spy.calls
    assert await open_uploads(store, tenant) == []
    head = await raw_client(store).head_object(
        Bucket=store.bucket, Key=ref.key, ChecksumMode="ENABLED"
    )
    assert "-" not in head["ChecksumSHA256"]  # the single-PUT object, not ours
    assert await resources.store.get(tenant, ref) == data


async def test_put_stream_over_corrupted_object_with_forged_metadata_is_refused(
    resources: Resources, tenant: str
) -> None:
    total = 17 * MiB
    ref = await resources.store.put_stream(tenant, stream(total, tenant))
    # Same size, other bytes, a forged sha256 claim, and no server-kept checksum.
    await raw_client(resources.store).put_object(
        Bucket=resources.store.bucket,
        Key=ref.key,
        Body=os.urandom(total),
        Metadata={"sha256": ref.sha256},
    )

    with pytest.raises(ArtifactIntegrityError, match="does not hash"):
        await resources.store.put_stream(tenant, stream(total, tenant))


async def test_put_file_small_goes_single_put_and_large_goes_multipart(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    store = resources.store
    small, large = tmp_path / "small.txt", tmp_path / "large.bin"
    small.write_bytes(b"small file " + os.urandom(16))
    large.write_bytes(b"".join(blocks(17 * MiB, tenant)))

    small_ref = await store.put_file(tenant, small, "text/plain")
    large_ref = await store.put_file(tenant, large)

    assert small_ref == await store.put(tenant, small.read_bytes(), "text/plain")
    assert large_ref.sha256 == hashlib.sha256(large.read_bytes()).hexdigest()
    checksums = [
        (
            await raw_client(store).head_object(
                Bucket=store.bucket, Key=r.key, ChecksumMode="ENABLED"
            )
        )["ChecksumSHA256"]
        for r in (small_ref, large_ref)
    ]
    assert "-" not in checksums[0]
    assert checksums[1].endswith("-3")


async def test_empty_and_small_streams_are_stored_like_put(
    resources: Resources, tenant: str
) -> None:
    store = resources.store

    async def pieces(*chunks: bytes) -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    empty = await store.put_stream(tenant, pieces(), "text/plain")
    small = await store.put_stream(tenant, pieces(b"ab", b"", b"cd"), "text/plain")

    assert empty == await store.put(tenant, b"", "text/plain")
    assert small == await store.put(tenant, b"abcd", "text/plain")
    assert await store.get(tenant, small) == b"abcd"
    assert [c async for c in store.iter_chunks(tenant, empty)] == []


@pytest.mark.parametrize("bad_tenant", ["../x", "", "a/b", "-dash"])
async def test_invalid_tenant_is_rejected_before_the_stream_is_read(
    resources: Resources, bad_tenant: str, tmp_path: Path
) -> None:
    store, spy = spied(resources.store)
    pulled: list[int] = []

    async def source() -> AsyncIterator[bytes]:
        pulled.append(1)
        yield b"payload"

    with pytest.raises(InvalidTenant):
        await store.put_stream(bad_tenant, source(), spool_dir=tmp_path)
    (tmp_path / "f").write_bytes(b"payload")
    with pytest.raises(InvalidTenant):
        await store.put_file(bad_tenant, tmp_path / "f")

    assert pulled == []
    assert spy.calls == []
    assert os.listdir(tmp_path) == ["f"]
