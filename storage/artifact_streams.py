"""Large artifacts for ArtifactStore: spool-and-hash, multipart upload, streamed reads.

A content-addressed key needs the sha256 before the first byte is sent, so a stream is
spooled to a temp file while it is hashed, then uploaded from that file one part at a time;
memory stays at about one part whatever the object's size. The same hashing pass records the
sha256 of every part, which gives the composite checksum ("<b64>-<N>") S3 keeps for a
multipart object: comparing it to HEAD verifies the bytes without downloading them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from botocore.exceptions import ClientError

from durable_agents.storage.errors import ArtifactIntegrityError

logger = logging.getLogger(__name__)

MiB = 1024 * 1024
DEFAULT_MULTIPART_THRESHOLD = 16 * MiB
DEFAULT_PART_SIZE = 8 * MiB
MIN_PART_SIZE = 5 * MiB  # S3's floor for every part but the last
MAX_PARTS = 10_000  # S3's ceiling on parts per upload
READ_CHUNK = 1 * MiB  # file reads, spool writes and streamed re-hashes go this many at a time


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def status(err: ClientError) -> int:
    return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


@dataclass(frozen=True)
class Hashed:
    """What one pass over the bytes learnt: the full sha256 and the sha256 of each part."""

    sha256: str
    size: int
    part_size: int
    part_digests: tuple[bytes, ...]

    @property
    def full_checksum(self) -> str:
        """The base64 ChecksumSHA256 of the whole object, as a single PUT would store it."""
        return b64(bytes.fromhex(self.sha256))

    @property
    def composite_checksum(self) -> str:
        """S3's multipart ChecksumSHA256: sha256 over the parts' raw digests, then "-N"."""
        joined = hashlib.sha256(b"".join(self.part_digests)).digest()
        return f"{b64(joined)}-{len(self.part_digests)}"


class PartHasher:
    """Hash the whole and each `part_size` slice in one pass over arbitrarily cut chunks."""

    def __init__(self, part_size: int) -> None:
        self.part_size = part_size
        self._full, self._part = hashlib.sha256(), hashlib.sha256()
        self._filled = self._size = 0
        self._parts: list[bytes] = []

    def update(self, data: bytes | bytearray) -> None:
        self._full.update(data)
        self._size += len(data)
        view = memoryview(data)
        while view:
            take = min(len(view), self.part_size - self._filled)
            self._part.update(view[:take])
            self._filled += take
            view = view[take:]
            if self._filled == self.part_size:
                self._parts.append(self._part.digest())
                self._part, self._filled = hashlib.sha256(), 0

    def finish(self) -> Hashed:
        parts = list(self._parts)
        if self._filled or not parts:  # the short last part; an empty object is one empty part
            parts.append(self._part.digest())
        return Hashed(self._full.hexdigest(), self._size, self.part_size, tuple(parts))


def part_size_for(size: int, preferred: int) -> int:
    """`preferred`, or bigger (whole MiB) when the object would otherwise need > MAX_PARTS."""
    if size <= preferred * MAX_PARTS:
        return preferred
    return math.ceil(size / MAX_PARTS / MiB) * MiB


def hash_file(path: Path, part_size: int) -> Hashed:
    """Blocking: hash a file READ_CHUNK at a time (run it in a thread)."""
    hasher = PartHasher(part_size_for(path.stat().st_size, part_size))
    with path.open("rb") as f:
        while chunk := f.read(READ_CHUNK):
            hasher.update(chunk)
    return hasher.finish()


def read_at_most(path: Path, limit: int) -> bytes:
    with path.open("rb") as f:
        return f.read(limit)


def _write_and_hash(f: BinaryIO, hasher: PartHasher, data: bytearray) -> None:
    f.write(data)
    hasher.update(data)


@asynccontextmanager
async def spooled(
    chunks: AsyncIterator[bytes], spool_dir: Path | None, part_size: int
) -> AsyncIterator[tuple[Path, Hashed]]:
    """Drain `chunks` into a temp file, hashing on the way; the file is removed on exit."""
    fd, name = tempfile.mkstemp(prefix="artifact-", suffix=".spool", dir=spool_dir)
    path = Path(name)
    try:
        hasher = PartHasher(part_size)
        batch = bytearray()
        with os.fdopen(fd, "wb") as f:
            # Small chunks are batched so the thread hop and the write happen once per MiB.
            async for chunk in chunks:
                batch += chunk
                if len(batch) >= READ_CHUNK:
                    await asyncio.to_thread(_write_and_hash, f, hasher, batch)
                    batch.clear()
            await asyncio.to_thread(_write_and_hash, f, hasher, batch)
        hashed = hasher.finish()
        if len(hashed.part_digests) > MAX_PARTS:  # too big for this part size: re-cut it
            hashed = await asyncio.to_thread(hash_file, path, part_size)
        yield path, hashed
    finally:
        await asyncio.to_thread(path.unlink, missing_ok=True)


def _read_part(f: BinaryIO, size: int) -> tuple[bytes, bytes]:
    data = f.read(size)
    return data, hashlib.sha256(data).digest()


async def put_multipart(
    s3: Any, bucket: str, key: str, path: Path, hashed: Hashed, content_type: str
) -> None:
    """Store the file at `key` by multipart upload unless a verified copy is already there.

    Conditional create: a HEAD first (a verified existing object makes this a no-op), then
    IfNoneMatch="*" on CompleteMultipartUpload against a concurrent writer (412: theirs won,
    and is verified instead). A server ignoring the header only loses that race protection.
    """
    try:
        head = await s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as err:
        if status(err) != 404:
            raise
    else:
        logger.debug("artifact %s already stored", hashed.sha256)
        await verify_object(s3, bucket, key, hashed, head)
        return
    await _upload(s3, bucket, key, path, hashed, content_type)
    await verify_object(s3, bucket, key, hashed)


async def _upload(
    s3: Any, bucket: str, key: str, path: Path, hashed: Hashed, content_type: str
) -> None:
    """Upload the parts and complete; a concurrent create winning (412) is not an error."""
    created = await s3.create_multipart_upload(
        Bucket=bucket,
        Key=key,
        ContentType=content_type,
        ChecksumAlgorithm="SHA256",
        # A claim for readers of the object; verification never trusts it alone.
        Metadata={"sha256": hashed.sha256},
    )
    upload_id = created["UploadId"]
    try:
        parts = await _send_parts(s3, bucket, key, upload_id, path, hashed)
        try:
            await s3.complete_multipart_upload(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
        except ClientError as err:
            if status(err) != 412:
                raise
        else:
            return
    except BaseException:
        await _abort(s3, bucket, key, upload_id)
        raise
    # A refused complete leaves the upload and its parts behind (SeaweedFS does).
    logger.debug("artifact %s was created concurrently", hashed.sha256)
    await _abort(s3, bucket, key, upload_id)


async def _send_parts(
    s3: Any, bucket: str, key: str, upload_id: str, path: Path, hashed: Hashed
) -> list[dict[str, Any]]:
    """Read and send one part at a time, each with its ChecksumSHA256 for the server to check."""
    parts: list[dict[str, Any]] = []
    f = await asyncio.to_thread(path.open, "rb")
    try:
        for number, expected in enumerate(hashed.part_digests, start=1):
            data, digest = await asyncio.to_thread(_read_part, f, hashed.part_size)
            if digest != expected:
                # The file changed since it was hashed: its key would name other bytes.
                raise ArtifactIntegrityError(f"{path} changed while it was being uploaded")
            checksum = b64(digest)
            sent = await s3.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=data,
                ChecksumSHA256=checksum,
            )
            del data  # one part in memory, not two, while the next one is read
            parts.append({"PartNumber": number, "ETag": sent["ETag"], "ChecksumSHA256": checksum})
    finally:
        await asyncio.to_thread(f.close)
    return parts


async def _abort(s3: Any, bucket: str, key: str, upload_id: str) -> None:
    """Drop the parts so far; shielded so a cancelled upload still cleans up after itself."""
    try:
        await asyncio.shield(s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id))
    except Exception:  # the original failure matters more; S3 lifecycle rules catch leftovers
        logger.warning("could not abort multipart upload %s of %s", upload_id, key, exc_info=True)


async def verify_object(
    s3: Any, bucket: str, key: str, hashed: Hashed, head: dict[str, Any] | None = None
) -> None:
    """Raise ArtifactIntegrityError unless the object at `key` holds exactly `hashed`'s bytes.

    The server-kept checksum decides when it is comparable: our composite (same part layout)
    or a full-object sha256. Otherwise (no checksum, or another part layout) the bytes are
    re-hashed as they stream in. x-amz-meta-sha256 is only a claim: a contradicting one fails,
    a matching one proves nothing.
    """
    if head is None:
        try:
            head = await s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except ClientError as err:
            if status(err) == 404:
                raise ArtifactIntegrityError(f"object {key} missing right after upload") from err
            raise
    if head.get("ContentLength") != hashed.size:
        raise ArtifactIntegrityError(f"object {key} has size {head.get('ContentLength')}")
    claimed = head.get("Metadata", {}).get("sha256")
    if claimed is not None and claimed != hashed.sha256:
        raise ArtifactIntegrityError(f"object {key} claims sha256 {claimed}")
    stored = head.get("ChecksumSHA256")
    if stored in (hashed.composite_checksum, hashed.full_checksum):
        return
    if stored is not None and "-" not in stored:  # a full-object sum ('-' is not base64)
        raise ArtifactIntegrityError(f"object {key} has a different sha256 checksum")
    digest = hashlib.sha256()  # streamed: the object may be far larger than memory
    async for chunk in iter_object(s3, bucket, key):
        digest.update(chunk)
    if digest.hexdigest() != hashed.sha256:
        raise ArtifactIntegrityError(f"object {key} does not hash to its name")


async def iter_object(
    s3: Any, bucket: str, key: str, chunk_size: int = READ_CHUNK
) -> AsyncIterator[bytes]:
    """Yield the object in chunks of exactly `chunk_size` bytes (the last may be shorter)."""
    body = (await s3.get_object(Bucket=bucket, Key=key))["Body"]
    async with body:  # not `as`: entering yields the raw response, not the StreamingBody
        async for chunk in exact_chunks(body, chunk_size):
            yield chunk


async def exact_chunks(body: Any, chunk_size: int) -> AsyncIterator[bytes]:
    """An open StreamingBody re-cut into pieces of exactly `chunk_size` (the last shorter)."""
    pending = bytearray()
    while piece := await body.read(chunk_size - len(pending)):
        pending += piece
        if len(pending) == chunk_size:
            yield bytes(pending)
            pending.clear()
    if pending:
        yield bytes(pending)
