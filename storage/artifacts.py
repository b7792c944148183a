"""Content-addressed ArtifactStore on S3: upload, verify, and only then hand out a ref.

The key is `{prefix}/{tenant}/sha256/ab/cd/{sha256}`, so the same bytes become the same
object, uploaded once. A put sends ChecksumSHA256 (the server rejects corrupted bodies),
creates conditionally (IfNoneMatch) so a second upload is a no-op, and confirms with a
HEAD before returning. A get re-hashes what it read.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from typing import Any

from botocore.exceptions import ClientError

from storage.errors import ArtifactIntegrityError, ArtifactNotFound, InvalidTenant
from workflows.contracts import ArtifactRef

logger = logging.getLogger(__name__)

_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


def check_tenant(tenant_id: str) -> str:
    if not _TENANT_RE.fullmatch(tenant_id):
        raise InvalidTenant(
            f"invalid tenant id {tenant_id!r}: use 1-128 letters, digits, '.', '_' or '-'"
        )
    return tenant_id


def artifact_key(prefix: str, tenant_id: str, sha256: str) -> str:
    check_tenant(tenant_id)
    if not _SHA_RE.fullmatch(sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return f"{prefix}/{tenant_id}/sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def _error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _status(err: ClientError) -> int:
    return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class ArtifactStore:
    """Artifacts in one bucket. `client` is an open aioboto3 S3 client owned by the caller."""

    def __init__(self, client: Any, bucket: str, prefix: str = "artifacts") -> None:
        self._s3 = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")

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
        """Store `data` under its sha256 and return a ref only once the object is verified."""
        digest = hashlib.sha256(data)
        sha = digest.hexdigest()
        key = artifact_key(self.prefix, tenant_id, sha)
        checksum = base64.b64encode(digest.digest()).decode()
        try:
            await self._s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
                ContentType=content_type,
                ChecksumSHA256=checksum,
                IfNoneMatch="*",
                Metadata={"sha256": sha},
            )
        except ClientError as err:
            # 412: the object already exists, which for a content-addressed key means the same
            # bytes are there. 409: a concurrent create of the same key won; the HEAD decides.
            if _status(err) not in (409, 412):
                raise
            logger.debug("artifact %s already stored", sha)
        await self._verify_head(key, sha, checksum, len(data))
        return ArtifactRef(
            tenant_id=tenant_id,
            sha256=sha,
            key=key,
            size_bytes=len(data),
            content_type=content_type,
        )

    async def _verify_head(self, key: str, sha: str, checksum: str, size: int) -> None:
        try:
            head = await self._s3.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        except ClientError as err:
            if _status(err) == 404:
                raise ArtifactIntegrityError(f"object {key} missing right after upload") from err
            raise
        stored_sum = head.get("ChecksumSHA256")
        if head.get("ContentLength") != size:
            raise ArtifactIntegrityError(f"object {key} has size {head.get('ContentLength')}")
        if stored_sum is not None and stored_sum != checksum:
            raise ArtifactIntegrityError(f"object {key} has a different sha256 checksum")
        if stored_sum is None:
            # No server-kept checksum (written by something else): x-amz-meta-sha256 is just a
            # claim, so hash the bytes that are actually there.
            obj = await self._s3.get_object(Bucket=self.bucket, Key=key)
            async with obj["Body"] as body:
                if hashlib.sha256(await body.read()).hexdigest() != sha:
                    raise ArtifactIntegrityError(f"object {key} does not hash to its name")

    async def exists(self, ref: ArtifactRef) -> bool:
        try:
            await self._s3.head_object(Bucket=self.bucket, Key=ref.key)
        except ClientError as err:
            if _status(err) == 404:
                return False
            raise
        return True

    async def get(self, tenant_id: str, ref: ArtifactRef) -> bytes:
        """Read an artifact of `tenant_id`, checking the bytes still hash to the ref's sha256."""
        if ref.tenant_id != tenant_id or ref.key != artifact_key(
            self.prefix, tenant_id, ref.sha256
        ):
            # Another tenant's object is indistinguishable from a missing one.
            raise ArtifactNotFound(f"artifact {ref.sha256} not found")
        try:
            obj = await self._s3.get_object(Bucket=self.bucket, Key=ref.key)
        except ClientError as err:
            if _status(err) == 404 or _error_code(err) == "NoSuchKey":
                raise ArtifactNotFound(f"artifact {ref.sha256} not found") from err
            raise
        async with obj["Body"] as body:
            data: bytes = await body.read()
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise ArtifactIntegrityError(f"artifact {ref.sha256} failed its sha256 check")
        return data
