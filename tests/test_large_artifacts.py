"""Large artifacts against a real S3 (SeaweedFS): streamed multipart upload with bounded memory,
dedup without re-upload, abort on failure, ranged and streamed reads, presigned URLs."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import resource
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from storage.artifacts import ArtifactStore
from storage.errors import ArtifactIntegrityError, ArtifactNotFound, InvalidTenant
from tests.support.helpers import s3_keys
from workers.resources import Resources

MiB = 1024 * 1024
BIG = 200 * MiB
MEMORY_BUDGET = 64 * MiB  # traced Python allocations, the reliable signal
# Max RSS also counts allocator slack and C buffers, so it only gets a coarse bound: enough
# to catch the object being held whole (200 MiB), not tight enough to be flaky.
RSS_BUDGET = 128 * MiB

Hook = Callable[..., Awaitable[Any]]


class Spy:
    """An S3 client stand-in: records each call and lets a test wrap chosen operations."""

    def __init__(self, client: Any, **hooks: Hook) -> None:
        self._client = client
        self._hooks = hooks
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name in self._hooks:
                return await self._hooks[name](real, *args, **kwargs)
            return await real(*args, **kwargs)

        return call


def _blocks(total: int, seed: str) -> Iterator[bytes]:
    """`total` bytes of deterministic data in 1 MiB blocks, each made distinct by its index."""
    base = hashlib.shake_256(seed.encode()).digest(MiB)
    for i in range(total // MiB):
        yield i.to_bytes(8, "big") + base[8:]
    if rest := total % MiB:
        yield base[:rest]


async def _stream(total: int, seed: str, *, fail_at: int | None = None) -> AsyncIterator[bytes]:
    """The same data generated on the fly, never held whole; optionally failing part-way."""
    for i, block in enumerate(_blocks(total, seed)):
        if i == fail_at:
            raise ConnectionError("source went away")
        yield block
        await asyncio.sleep(0)


def _sha(total: int, seed: str) -> str:
    digest = hashlib.sha256()
    for block in _blocks(total, seed):
        digest.update(block)
    return digest.hexdigest()


def _raw(store: ArtifactStore) -> Any:
    return store._s3


def _spied(store: ArtifactStore, **hooks: Hook) -> tuple[ArtifactStore, Spy]:
    spy = Spy(_raw(store), **hooks)
    return ArtifactStore(spy, store.bucket, store.prefix), spy


async def _uploads(store: ArtifactStore, tenant: str) -> list[str]:
    """Multipart uploads still open under the tenant's prefix."""
    listed = await _raw(store).list_multipart_uploads(
        Bucket=store.bucket, Prefix=f"{store.prefix}/{tenant}/"
    )
    return [u["Key"] for u in listed.get("Uploads", [])]


def _rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


async def test_200mb_stream_uploads_and_reads_back_with_bounded_memory(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    store = resources.store
    expected = _sha(BIG, tenant)
    rss_before = _rss_bytes()

    tracemalloc.start()
    began = time.monotonic()
    ref = await store.put_stream(
        tenant, _stream(BIG, tenant), "application/x-big", spool_dir=tmp_path
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
    head = await _raw(store).head_object(Bucket=store.bucket, Key=ref.key, ChecksumMode="ENABLED")
    # Multipart (8 MiB parts): the server keeps a composite checksum, the metadata the full sum.
    assert head["ChecksumSHA256"].endswith("-25")
    assert head["Metadata"]["sha256"] == expected
    assert head["ContentType"] == "application/x-big"
    assert os.listdir(tmp_path) == []  # the spool file is gone
    assert await _uploads(store, tenant) == []


async def test_second_put_stream_of_same_bytes_uploads_nothing(
    resources: Resources, tenant: str
) -> None:
    total = 20 * MiB + 123
    first = await resources.store.put_stream(tenant, _stream(total, tenant))
    before = await _raw(resources.store).head_object(Bucket=resources.store.bucket, Key=first.key)
    store, spy = _spied(resources.store)

    await asyncio.sleep(1.1)  # LastModified has one-second resolution: a rewrite would show
    second = await store.put_stream(tenant, _stream(total, tenant))
    after = await _raw(resources.store).head_object(Bucket=store.bucket, Key=second.key)

    assert second == first
    assert (after["LastModified"], after["ETag"]) == (before["LastModified"], before["ETag"])
    # One HEAD decided it: the composite checksum matched, so no upload and no re-download.
    assert spy.calls == ["head_object"]


async def test_failing_chunk_source_leaves_no_object_and_no_upload(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    store, spy = _spied(resources.store)

    with pytest.raises(ConnectionError):
        await store.put_stream(tenant, _stream(40 * MiB, tenant, fail_at=25), spool_dir=tmp_path)

    assert spy.calls == []  # nothing is sent before the whole stream is hashed
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == []
    assert await _uploads(store, tenant) == []
    assert os.listdir(tmp_path) == []


async def test_failure_during_part_upload_aborts_the_multipart_upload(
    resources: Resources, tenant: str
) -> None:
    async def flaky_upload_part(real: Hook, **kwargs: Any) -> Any:
        if kwargs["PartNumber"] == 2:
            raise ConnectionResetError("connection lost mid-part")
        return await real(**kwargs)

    store, spy = _spied(resources.store, upload_part=flaky_upload_part)

    with pytest.raises(ConnectionResetError):
        await store.put_stream(tenant, _stream(20 * MiB, tenant))

    assert spy.calls[-1] == "abort_multipart_upload"
    assert "complete_multipart_upload" not in spy.calls
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == []
    assert await _uploads(store, tenant) == []


async def test_put_file_changed_during_upload_is_refused_and_aborted(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"".join(_blocks(20 * MiB, tenant)))

    async def tamper_then_upload(real: Hook, **kwargs: Any) -> Any:
        if kwargs["PartNumber"] == 1:
            with path.open("r+b") as f:  # rewrite part 2 after the file was hashed
                f.seek(9 * MiB)
                f.write(b"changed")
        return await real(**kwargs)

    store, spy = _spied(resources.store, upload_part=tamper_then_upload)

    with pytest.raises(ArtifactIntegrityError, match="changed"):
        await store.put_file(tenant, path)

    assert spy.calls.count("upload_part") == 1
    assert spy.calls[-1] == "abort_multipart_upload"
    assert await s3_keys(resources, f"{store.prefix}/{tenant}/") == []
    assert await _uploads(store, tenant) == []


async def test_concurrent_create_wins_the_conditional_complete(
    resources: Resources, tenant: str
) -> None:
    """Another writer stores the same bytes between our HEAD and our complete: 412, theirs
    stays, our upload is aborted and the ref is still returned (after verifying theirs)."""
    total = 18 * MiB
    data = b"".join(_blocks(total, tenant))

    async def other_writer_first(real: Hook, **kwargs: Any) -> Any:
        await resources.store.put(tenant, data)
        return await real(**kwargs)

    store, spy = _spied(resources.store, complete_multipart_upload=other_writer_first)
    ref = await store.put_stream(tenant, _stream(total, tenant))

    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert "abort_multipart_upload" in spy.calls
    assert await _uploads(store, tenant) == []
    head = await _raw(store).head_object(Bucket=store.bucket, Key=ref.key, ChecksumMode="ENABLED")
    assert "-" not in head["ChecksumSHA256"]  # the single-PUT object, not ours
    assert await resources.store.get(tenant, ref) == data


async def test_put_stream_over_corrupted_object_with_forged_metadata_is_refused(
    resources: Resources, tenant: str
) -> None:
    total = 17 * MiB
    ref = await resources.store.put_stream(tenant, _stream(total, tenant))
    # Same size, other bytes, a forged sha256 claim, and no server-kept checksum.
    await _raw(resources.store).put_object(
        Bucket=resources.store.bucket,
        Key=ref.key,
        Body=os.urandom(total),
        Metadata={"sha256": ref.sha256},
    )

    with pytest.raises(ArtifactIntegrityError, match="does not hash"):
        await resources.store.put_stream(tenant, _stream(total, tenant))


async def test_put_file_small_goes_single_put_and_large_goes_multipart(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    store = resources.store
    small, large = tmp_path / "small.txt", tmp_path / "large.bin"
    small.write_bytes(b"small file " + os.urandom(16))
    large.write_bytes(b"".join(_blocks(17 * MiB, tenant)))

    small_ref = await store.put_file(tenant, small, "text/plain")
    large_ref = await store.put_file(tenant, large)

    assert small_ref == await store.put(tenant, small.read_bytes(), "text/plain")
    assert large_ref.sha256 == hashlib.sha256(large.read_bytes()).hexdigest()
    checksums = [
        (await _raw(store).head_object(Bucket=store.bucket, Key=r.key, ChecksumMode="ENABLED"))[
            "ChecksumSHA256"
        ]
        for r in (small_ref, large_ref)
    ]
    assert "-" not in checksums[0]
    assert checksums[1].endswith("-3")


async def test_get_range_returns_exact_slices_and_validates_the_range(
    resources: Resources, tenant: str
) -> None:
    store = resources.store
    data = b"".join(_blocks(17 * MiB, tenant))
    ref = await store.put_stream(tenant, _stream(len(data), tenant))
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
    await _raw(store).put_object(Bucket=store.bucket, Key=ref.key, Body=os.urandom(len(data)))

    received: list[bytes] = []
    with pytest.raises(ArtifactIntegrityError):
        async for chunk in store.iter_chunks(tenant, ref, MiB):
            received.append(chunk)

    assert [len(c) for c in received] == [MiB, MiB, MiB, 5]


async def test_iter_chunks_checks_tenant_before_any_request(
    resources: Resources, tenant: str
) -> None:
    store, spy = _spied(resources.store)
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
    store, spy = _spied(resources.store)
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
