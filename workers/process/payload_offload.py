"""A safety net for oversized Temporal payloads: offload them to the artifact store.

The server fails a workflow task (or rejects an activity completion) once one payload passes
its blob limit (2 MiB by default, a warning from 512 KiB). Our activities return refs, so
this should rarely trigger, but a huge signal or a buggy activity result must not kill a
workflow. Payloads at or above a threshold are uploaded to S3 through `ArtifactStore.put`
(verified before the ref is used) and replaced in history by a small reference; reading
them back goes through `ArtifactStore.get`, which re-checks the sha256.

Mechanism: temporalio 1.35's own `ExternalStorage` (the claim-check layer of the data
converter, `DataConverter.external_storage`) with a `StorageDriver` backed by our store,
rather than a hand-written `PayloadCodec`. The SDK runs it outside the workflow sandbox,
bounds its concurrency per workflow task, and marks each reference payload with the
original size (`Payload.external_payloads`), so a client without the driver fails with a
clear TMPRL1105 error instead of handing a reference to user code as if it were data.
The API is marked experimental in the SDK; the reference written into history is the SDK's
`temporal.api.sdk.v1.ExternalStorageReference` (json/protobuf) naming our driver, and its
claim data is our ArtifactRef (tenant_id, sha256, key, size_bytes, content_type).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from durable_agents.storage.artifacts import ArtifactStore, check_tenant
from durable_agents.storage.errors import ArtifactIntegrityError
from durable_agents.workflows.contracts import ArtifactRef

# Tenant ids must start with a letter or digit (storage.artifacts.check_tenant), so the
# system tenant cannot be "_payloads". Offloaded payloads are kept apart from every real
# tenant's artifacts: a retention rule can target this prefix alone.
SYSTEM_TENANT = "_payloads"
# Persisted in every reference written to history: renaming it strands those references.
DRIVER_NAME = "durable-agents.artifact-store"
PAYLOAD_CONTENT_TYPE = "application/vnd.temporal.payload+protobuf"
DEFAULT_THRESHOLD_BYTES = 256 * 1024

_T = TypeVar("_T")
_CLAIM_FIELDS = ("tenant_id", "sha256", "key", "size_bytes", "content_type")


class ArtifactStoreDriver(StorageDriver):
    """Stores whole serialized `Payload` messages as content-addressed artifacts.

    `store` must outlive every client and worker using the driver: it holds the open S3
    client, so build the driver inside the block that owns the store.
    """

    def __init__(self, store: ArtifactStore, tenant_id: str = SYSTEM_TENANT) -> None:
        self._store = store
        self._tenant = check_tenant(tenant_id)

    def name(self) -> str:
        return DRIVER_NAME

    def type(self) -> str:
        return DRIVER_NAME

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """Upload each payload; a claim is only returned for an object the store verified."""
        refs = await _all(
            self._store.put(self._tenant, p.SerializeToString(), PAYLOAD_CONTENT_TYPE)
            for p in payloads
        )
        return [StorageDriverClaim(claim_data=_claim_data(ref)) for ref in refs]

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """Download and sha256-verify each payload (ArtifactIntegrityError on a mismatch)."""
        refs = [_ref_from_claim(c) for c in claims]
        blobs = await _all(self._store.get(self._tenant, ref) for ref in refs)
        out: list[Payload] = []
        for blob in blobs:
            payload = Payload()
            payload.ParseFromString(blob)
            out.append(payload)
        return out


async def _all(coros: Iterable[Coroutine[Any, Any, _T]]) -> list[_T]:
    """Run concurrently; on the first error cancel the rest and raise that error itself.

    Not a TaskGroup: its ExceptionGroup would hide ArtifactIntegrityError from callers.
    Not a bare gather: the siblings of a failed upload would keep running unobserved.
    """
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _claim_data(ref: ArtifactRef) -> dict[str, str]:
    return {
        "tenant_id": ref.tenant_id,
        "sha256": ref.sha256,
        "key": ref.key,
        "size_bytes": str(ref.size_bytes),
        "content_type": ref.content_type,
    }


def _ref_from_claim(claim: StorageDriverClaim) -> ArtifactRef:
    data = claim.claim_data
    missing = [f for f in _CLAIM_FIELDS if f not in data]
    if missing or not data["size_bytes"].isdigit():
        raise ArtifactIntegrityError(f"malformed offloaded-payload claim (missing {missing})")
    # The key is not trusted as given: ArtifactStore.get recomputes it from tenant and sha256
    # and treats a mismatch (or a foreign tenant) as not found.
    return ArtifactRef(
        tenant_id=data["tenant_id"],
        sha256=data["sha256"],
        key=data["key"],
        size_bytes=int(data["size_bytes"]),
        content_type=data["content_type"],
    )


def offload_storage(
    store: ArtifactStore, threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
) -> ExternalStorage:
    """The SDK external-storage config: payloads of `threshold_bytes` or more are offloaded."""
    return ExternalStorage(
        drivers=[ArtifactStoreDriver(store)], payload_size_threshold=threshold_bytes
    )


def data_converter_with_offload(
    store: ArtifactStore,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    base: DataConverter | None = None,
) -> DataConverter:
    """`base` (the SDK's default dataclass/JSON converter) plus offloading of big payloads.

    Use the same converter on every client and worker that may read these payloads,
    including CLI clients that fetch results or queries.
    """
    return dataclasses.replace(
        base or DataConverter.default,
        external_storage=offload_storage(store, threshold_bytes),
    )
