"""Committing a reference to an uploaded artifact, safely against a concurrent collector."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.vocabulary.artifact_ref import ArtifactRef


async def register_uploaded(
    db: AsyncSession, store: ArtifactStore, ref: ArtifactRef, content: bytes
) -> uuid.UUID:
    """Register `ref` in this unit of work, making sure its object exists at commit.

    The content lock is held until the transaction ends, so no sweep can delete the object
    between this check and the commit. A sweep that ran *before* we took the lock (between
    our upload and now) may already have removed it: then we upload it again.
    """
    repo = ArtifactRepository(db, ref.tenant_id)
    await repo.lock_content(ref.sha256)
    artifact_id = await repo.register(ref)  # no uri: ArtifactStore.uri derives it
    if not await store.exists(ref):
        await store.put(ref.tenant_id, content, ref.content_type)
    return artifact_id


def artifact_info(ref: ArtifactRef, *, with_key: bool = True) -> dict[str, object]:
    """What an item keeps about its artifact, for notes and readers. Without `with_key`
    the store key is left out (~100 B an item): it is derived from the tenant and sha256
    (ArtifactStore.ref_for); tool results are written so."""
    info: dict[str, object] = {
        "sha256": ref.sha256,
        "size_bytes": ref.size_bytes,
        "content_type": ref.content_type,
    }
    if with_key:
        info["key"] = ref.key
    return info
