"""Content-addressed ArtifactStore on S3: upload, verify, and only then hand out a ref.

The key is `{prefix}/{tenant}/sha256/ab/cd/{sha256}`, so the same bytes become the same
object, uploaded once. A put sends ChecksumSHA256 (the server rejects corrupted bodies),
creates conditionally (IfNoneMatch) so a second upload is a no-op, and confirms with a
HEAD before returning. A get re-hashes what it read.

A body is stored zstd-compressed when that saves bytes (storage/artifact_codec.py); keys, refs
and every check still name the raw bytes, and reads decode (storage/artifact_decode.py).

Large artifacts (put_file, put_stream, iter_chunks; storage/artifact_streams.py) go through a
hashed temp file and a multipart upload verified by its composite checksum, so memory stays
at about one part whatever the size.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from durable_agents.storage import artifact_codec as codec
from durable_agents.storage import artifact_decode as decode
from durable_agents.storage import artifact_streams as streams
from durable_agents.storage.artifact_streams import error_code as _error_code
from durable_agents.storage.artifact_streams import status as _status
from durable_agents.storage.download_types import download_headers
from durable_agents.storage.errors import ArtifactIntegrityError, ArtifactNotFound, InvalidTenant
from durable_agents.vocabulary.artifact_ref import ArtifactRef

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

# A leading "_" marks a system tenant (e.g. offloaded Temporal payloads): the store
# accepts it, user-facing entry points refuse it (check_user_tenant).
_TENANT_RE = re.compile(r"^_?[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_PRESIGN_SECONDS = 3600  # a download link is a bearer credential: keep it short-lived


def check_tenant(tenant_id: str) -> str:
    if not _TENANT_RE.fullmatch(tenant_id):
        raise InvalidTenant(
            f"invalid tenant id {tenant_id!r}: use 1-128 letters, digits, '.', '_' or '-'"
        )
    return tenant_id


def check_user_tenant(tenant_id: str) -> str:
    """A tenant a user may act as: valid, and not one of the system's reserved ones."""
    if tenant_id.startswith("_"):
        raise InvalidTenant(f"tenant ids starting with '_' are reserved: {tenant_id!r}")
    return check_tenant(tenant_id)


def artifact_key(prefix: str, tenant_id: str, sha256: str) -> str:
    check_tenant(tenant_id)
    if not _SHA_RE.fullmatch(sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return f"{prefix}/{tenant_id}/sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}"


# Compressing or decoding more than this at once runs in a thread: ~1 ms per 250 KB here, and
# a worker's event loop also heartbeats and serves other activities.
_THREAD_MIN_BYTES = 256 * 1024


async def _off_loop(fn: Callable[..., _T], data: bytes, *args: Any) -> _T:
    if len(data) < _THREAD_MIN_BYTES:
        return fn(data, *args)
    return await asyncio.to_thread(fn, data, *args)


class ArtifactStore:
    """Artifacts in one bucket. `client` is an open aioboto3 S3 client owned by the caller."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str = "artifacts",
        *,
        multipart_threshold: int = streams.DEFAULT_MULTIPART_THRESHOLD,
        part_size: int = streams.DEFAULT_PART_SIZE,
        compress: bool = True,
    ) -> None:
        if part_size < streams.MIN_PART_SIZE:
            raise ValueError(f"part_size must be at least {streams.MIN_PART_SIZE} bytes")
        if multipart_threshold < 0:
            raise ValueError("multipart_threshold must not be negative")
        self._s3 = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self.compress = compress  # False: store raw bytes (objects written before compression)

    @property
    def client(self) -> Any:
        """The underlying S3 client, for maintenance jobs (GC) that list and delete."""
        return self._s3

    def ref_for(
        self, tenant_id: str, sha256: str, size_bytes: int, content_type: str
    ) -> ArtifactRef:
        """Rebuild the ref of a registered artifact from its metadata row."""
        return ArtifactRef(
            tenant_id=tenant_id,
            sha256=sha256,
            key=artifact_key(self.prefix, tenant_id, sha256),
            size_bytes=size_bytes,
            content_type=content_type,
        )

    def uri(self, ref: ArtifactRef) -> str:
        return f"s3://{self.bucket}/{ref.key}"

    async def ensure_bucket(self) -> None:
        try:
            await self._s3.head_bucket(Bucket=self.bucket)
        except ClientError as err:
            if _status(err) != 404 and _error_code(err) not in ("404", "NoSuchBucket"):
                raise
            await self._s3.create_bucket(Bucket=self.bucket)

    async def put(
        self, tenant_id: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> ArtifactRef:
        """Store `data` under its sha256 and return a ref only once the object is verified.

        The object holds `data` as zstd frames when that saves bytes (artifact_codec);
        the ref, the key and every check name the raw bytes.
        """
        digest = hashlib.sha256(data)
        sha = digest.hexdigest()
        key = artifact_key(self.prefix, tenant_id, sha)
        packed = await _off_loop(codec.pack, data) if self.compress else None
        body = data if packed is None else packed.body
        checksum = streams.b64(hashlib.sha256(body).digest())
        extra: dict[str, Any] = {"Metadata": {"sha256": sha}}
        if packed is not None:
            extra = codec.put_arguments(packed, len(data))
            extra["Metadata"]["sha256"] = sha
        try:
            sent = await self._s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                ChecksumSHA256=checksum,
                IfNoneMatch="*",
                **extra,
            )
        except ClientError as err:
            # 412: the object already exists, which for a content-addressed key means the same
            # bytes are there. 409: a concurrent create of the same key won; the HEAD decides.
            if _status(err) not in (409, 412):
                raise
            logger.debug("artifact %s already stored", sha)
            sent = None
        # A server that checked the body against ChecksumSHA256 (it refuses a mismatch with
        # BadDigest) says so by echoing the checksum: our bytes are stored, verified. Else
        # (an existing object, or a server that ignores checksums) the HEAD decides.
        if sent is None or sent.get("ChecksumSHA256") != checksum:
            await self._verify_head(key, sha, len(data), checksum, len(body))
        return ArtifactRef(
            tenant_id=tenant_id,
            sha256=sha,
            key=key,
            size_bytes=len(data),
            content_type=content_type,
        )

    async def _verify_head(
        self, key: str, sha: str, raw_size: int, checksum: str, stored_size: int
    ) -> None:
        """The object at `key` holds the raw bytes `sha` names, raw or compressed.

        `checksum`/`stored_size` describe the body we sent: an object with that server-kept
        checksum is those bytes (verified before sending). Anything else — the raw form, another
        compressor's frame, a server without checksums — is checked for what it is.
        """
        try:
            head = await self._s3.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        except ClientError as err:
            if _status(err) == 404:
                raise ArtifactIntegrityError(f"object {key} missing right after upload") from err
            raise
        stored_sum = head.get("ChecksumSHA256")
        if stored_sum == checksum and head.get("ContentLength") == stored_size:
            return
        if codec.layout_of(head) is None:
            if head.get("ContentLength") != raw_size:
                raise ArtifactIntegrityError(f"object {key} has size {head.get('ContentLength')}")
            raw_sum = streams.b64(bytes.fromhex(sha))
            if stored_sum is not None and stored_sum != raw_sum:
                raise ArtifactIntegrityError(f"object {key} has a different sha256 checksum")
            if stored_sum is not None:
                return
        # No comparable server-kept checksum (written by something else, or compressed
        # differently): x-amz-meta-sha256 is just a claim, so decode and hash what is there.
        digest, size = hashlib.sha256(), 0
        async for chunk in decode.raw_chunks(self._s3, self.bucket, key, raw_size):
            digest.update(chunk)
            size += len(chunk)
        if size != raw_size or digest.hexdigest() != sha:
            raise ArtifactIntegrityError(f"object {key} does not hash to its name")

    async def exists(self, ref: ArtifactRef) -> bool:
        try:
            await self._s3.head_object(Bucket=self.bucket, Key=ref.key)
        except ClientError as err:
            if _status(err) == 404:
                return False
            raise
        return True

    def _check_owner(self, tenant_id: str, ref: ArtifactRef) -> None:
        if ref.tenant_id != tenant_id or ref.key != artifact_key(
            self.prefix, tenant_id, ref.sha256
        ):
            # Another tenant's object is indistinguishable from a missing one.
            raise ArtifactNotFound(f"artifact {ref.sha256} not found")

    async def get(self, tenant_id: str, ref: ArtifactRef) -> bytes:
        """Read an artifact of `tenant_id`, checking the bytes still hash to the ref's sha256."""
        self._check_owner(tenant_id, ref)
        try:
            obj = await self._s3.get_object(Bucket=self.bucket, Key=ref.key)
        except ClientError as err:
            if _status(err) == 404 or _error_code(err) == "NoSuchKey":
                raise ArtifactNotFound(f"artifact {ref.sha256} not found") from err
            raise
        async with obj["Body"] as body:
            data: bytes = await body.read()
        if codec.layout_of(obj) is not None:
            data = await _off_loop(codec.decompress, data, ref.size_bytes)
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise ArtifactIntegrityError(f"artifact {ref.sha256} failed its sha256 check")
        return data

    async def stored_encoding(self, tenant_id: str, ref: ArtifactRef) -> str | None:
        """How the object is stored: None for the raw bytes, else its encoding ("zstd")."""
        self._check_owner(tenant_id, ref)
        try:
            head = await self._s3.head_object(Bucket=self.bucket, Key=ref.key)
        except ClientError as err:
            if _status(err) == 404:
                raise ArtifactNotFound(f"artifact {ref.sha256} not found") from err
            raise
        return None if codec.layout_of(head) is None else codec.ENCODING

    async def put_file(
        self, tenant_id: str, path: Path, content_type: str = "application/octet-stream"
    ) -> ArtifactRef:
        """Store a file of any size with memory bounded by one part; same guarantees as put().

        The file must not change while it is stored (ArtifactIntegrityError if it does).
        """
        check_tenant(tenant_id)
        hashed = await asyncio.to_thread(streams.hash_file, path, self.part_size)
        return await self._put_hashed(tenant_id, path, hashed, content_type)

    async def put_stream(
        self,
        tenant_id: str,
        chunks: AsyncIterator[bytes],
        content_type: str = "application/octet-stream",
        *,
        spool_dir: Path | None = None,
    ) -> ArtifactRef:
        """Store a stream: spooled to a temp file in `spool_dir` while hashed, then uploaded.

        The key is the sha256, so nothing is sent before the stream ends; an error from
        `chunks` therefore leaves no object and no multipart upload behind.
        """
        check_tenant(tenant_id)
        async with streams.spooled(chunks, spool_dir, self.part_size) as (path, hashed):
            return await self._put_hashed(tenant_id, path, hashed, content_type)

    async def _put_hashed(
        self, tenant_id: str, path: Path, hashed: streams.Hashed, content_type: str
    ) -> ArtifactRef:
        if hashed.size <= self.multipart_threshold:
            data = await asyncio.to_thread(streams.read_at_most, path, hashed.size + 1)
            if hashlib.sha256(data).hexdigest() != hashed.sha256:
                raise ArtifactIntegrityError(f"{path} changed while it was being stored")
            return await self.put(tenant_id, data, content_type)
        key = artifact_key(self.prefix, tenant_id, hashed.sha256)
        await streams.put_multipart(self._s3, self.bucket, key, path, hashed, content_type)
        return self.ref_for(tenant_id, hashed.sha256, hashed.size, content_type)

    async def get_range(
        self, tenant_id: str, ref: ArtifactRef, start: int, end_inclusive: int
    ) -> bytes:
        """Bytes `start`..`end_inclusive` of an artifact, as in an HTTP Range header.

        Not integrity-checked: a slice cannot be hashed against the whole object's sha256.
        Use get() or iter_chunks() when the bytes must be verified.
        """
        self._check_owner(tenant_id, ref)
        if not 0 <= start <= end_inclusive < ref.size_bytes:
            raise ValueError(f"range {start}-{end_inclusive} not within 0-{ref.size_bytes - 1}")
        try:
            obj = await self._s3.get_object(
                Bucket=self.bucket, Key=ref.key, Range=f"bytes={start}-{end_inclusive}"
            )
        except ClientError as err:
            if _status(err) == 404 or _error_code(err) == "NoSuchKey":
                raise ArtifactNotFound(f"artifact {ref.sha256} not found") from err
            if _status(err) != 416:
                raise
            # Past the stored end: a compressed object is shorter than its raw size (its
            # HEAD tells); a raw one is truncated.
            layout = codec.layout_of(await self._s3.head_object(Bucket=self.bucket, Key=ref.key))
            if layout is None:
                raise ArtifactIntegrityError(f"artifact {ref.sha256} is truncated") from err
            obj = None
        else:
            layout = codec.layout_of(obj)
        if layout is not None:
            data = await decode.compressed_range(
                self._s3, self.bucket, ref.key, layout, ref.size_bytes, obj, start, end_inclusive
            )
        else:
            async with obj["Body"] as body:
                data = await body.read()
        if len(data) != end_inclusive - start + 1:
            raise ArtifactIntegrityError(f"artifact {ref.sha256} is truncated")
        return data

    def iter_chunks(
        self, tenant_id: str, ref: ArtifactRef, chunk_size: int = streams.READ_CHUNK
    ) -> AsyncIterator[bytes]:
        """Stream an artifact in `chunk_size` pieces, checking its sha256 at the end.

        The check can only come after the last byte: ArtifactIntegrityError is raised then,
        so what was yielded is unverified until the iteration ends without error.
        """
        self._check_owner(tenant_id, ref)
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        return self._verified_chunks(ref, chunk_size)

    async def _verified_chunks(self, ref: ArtifactRef, chunk_size: int) -> AsyncIterator[bytes]:
        digest, size = hashlib.sha256(), 0
        try:
            chunks = decode.raw_chunks(self._s3, self.bucket, ref.key, ref.size_bytes, chunk_size)
            async for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                yield chunk
        except ClientError as err:
            if _status(err) == 404 or _error_code(err) == "NoSuchKey":
                raise ArtifactNotFound(f"artifact {ref.sha256} not found") from err
            raise
        if size != ref.size_bytes or digest.hexdigest() != ref.sha256:
            raise ArtifactIntegrityError(f"artifact {ref.sha256} failed its sha256 check")

    async def presigned_url(
        self, tenant_id: str, ref: ArtifactRef, *, expires_in: int = 300
    ) -> str:
        """A GET URL for the artifact that works without credentials for `expires_in` seconds.

        Signing is local (a missing object is a 404 at download time). The downloader skips
        get()'s integrity check, so it should verify ref.sha256 itself. The URL overrides the
        response's type and disposition (storage/download_types.py): the stored type is the
        tool's or device's word, and the store's origin is shared by every tenant's downloads,
        so an HTML or SVG result must never render there.
        """
        self._check_owner(tenant_id, ref)
        if not 1 <= expires_in <= MAX_PRESIGN_SECONDS:
            raise ValueError(f"expires_in must be 1..{MAX_PRESIGN_SECONDS} seconds")
        served = download_headers(ref.content_type, ref.sha256)
        url: str = await self._s3.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": ref.key,
                "ResponseContentType": served.content_type,
                "ResponseContentDisposition": served.disposition,
            },
            ExpiresIn=expires_in,
            HttpMethod="GET",
        )
        return url
