"""A device's result bytes in the object store before they are trusted: the staging key it
uploads to under its current lease, the presigned (and checksum-bound) PUT it is handed, and
reading the upload back to check it against the size and sha256 the device claims.

Nothing here commits: the dispatch (calls.py) stores verified bytes content-addressed and
commits them, or offers the call again when the upload does not match."""

from __future__ import annotations

import base64
import hashlib
import logging
from datetime import timedelta

from botocore.exceptions import ClientError

from durable_agents.storage.artifact_streams import status as s3_status
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.device_calls import STAGING_DIR
from durable_agents.storage.device_models import DeviceCallRow
from durable_agents.workers.device_dispatch.payloads import ResultClaim, UploadTarget

logger = logging.getLogger(__name__)

# An upload URL lives as long as the lease it was given under has left, within these.
UPLOAD_MIN_SECONDS, UPLOAD_MAX_SECONDS = 1, 900
# What is read back to verify, in memory: a larger result is refused.
MAX_RESULT_BYTES = 64 * 1024 * 1024


class Mismatch(Exception):
    """The upload is not what the device claims (`why`, in fixed words)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def staging_key(prefix: str, call: DeviceCallRow) -> str:
    """Where the device uploads this call's result under its current lease: one key per
    call and lease, under its tenant (an upload made under an older lease is never read;
    durable_agents.storage.gc collects what was left behind)."""
    return f"{prefix}/{call.tenant_id}/{STAGING_DIR}/{call.id}/{call.offers}"


async def upload_target(
    store: ArtifactStore, call: DeviceCallRow, lease_left: timedelta, sha256: str | None = None
) -> UploadTarget:
    """A presigned PUT for the call's staging key under its current lease, valid no longer
    than that lease has left; with `sha256`, bound to those bytes too (SeaweedFS and S3
    refuse a body whose sha256 differs: 400 BadDigest)."""
    expires = int(lease_left.total_seconds())
    expires = max(UPLOAD_MIN_SECONDS, min(UPLOAD_MAX_SECONDS, expires))
    params = {"Bucket": store.bucket, "Key": staging_key(store.prefix, call)}
    headers: dict[str, str] = {}
    if sha256 is not None:
        checksum = base64.b64encode(bytes.fromhex(sha256)).decode()
        params["ChecksumSHA256"] = checksum
        headers["x-amz-checksum-sha256"] = checksum
    url: str = await store.client.generate_presigned_url(
        "put_object", Params=params, ExpiresIn=expires, HttpMethod="PUT"
    )
    return UploadTarget(url=url, expires_in=expires, headers=headers)


async def read_back(store: ArtifactStore, call: DeviceCallRow, claimed: ResultClaim) -> bytes:
    """The uploaded bytes, if they are the size and sha256 claimed; Mismatch otherwise."""
    key = staging_key(store.prefix, call)
    if claimed.size_bytes > MAX_RESULT_BYTES:
        raise Mismatch(f"a result is at most {MAX_RESULT_BYTES} bytes")
    try:
        head = await store.client.head_object(Bucket=store.bucket, Key=key)
        if head.get("ContentLength") != claimed.size_bytes:
            raise Mismatch("the uploaded object's size is not the size claimed")
        data = b""
        if claimed.size_bytes:
            # One byte past the claim: an object replaced since the HEAD cannot make this
            # read more than MAX_RESULT_BYTES + 1, and a longer one fails the size check.
            obj = await store.client.get_object(
                Bucket=store.bucket, Key=key, Range=f"bytes=0-{claimed.size_bytes}"
            )
            async with obj["Body"] as stream:
                data = await stream.read()
    except ClientError as err:
        if s3_status(err) != 404:
            raise
        raise Mismatch("nothing was uploaded for this call") from None
    if len(data) != claimed.size_bytes or hashlib.sha256(data).hexdigest() != claimed.sha256:
        raise Mismatch("the uploaded object does not match the sha256 and size")
    return data


async def forget_upload(store: ArtifactStore, call: DeviceCallRow) -> None:
    """The staging object is not needed once verified or refused (best-effort)."""
    try:
        await store.client.delete_object(Bucket=store.bucket, Key=staging_key(store.prefix, call))
    except ClientError:
        logger.warning("staging object of device call %s not deleted", call.id)
