"""What archived sessions still need, for the collector: the artifacts their snapshots list.

An archived session holds one ref, on its snapshot; the artifacts its items name have no
row or ref of theirs in PostgreSQL (storage/archive_artifacts.py). So before GC deletes an
object without a live row, it asks here whether a snapshot of a session still archived
(a `session_archives` row) lists its bytes. Each snapshot is read once per pass.
"""

from __future__ import annotations

import logging
import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.archive_snapshot import SNAPSHOT_CONTENT_TYPE, listed_artifacts, unpack
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.models import SessionArchiveRow

logger = logging.getLogger(__name__)


class SnapshotLists:
    """One GC pass's view of the archived snapshots' artifact lists, per tenant."""

    def __init__(self, store: ArtifactStore) -> None:
        self._store = store
        self._read: dict[str, set[str]] = {}  # tenant -> snapshot sha256s read
        self._listed: dict[str, set[str]] = {}  # tenant -> artifact sha256s they list
        self.snapshots_read = 0

    async def lists(self, db: AsyncSession, tenant_id: str, sha256: str) -> bool:
        """Whether a snapshot of an archived session of the tenant lists `sha256`. Call
        after finding the artifact has no row: a session archived since is read then. A
        snapshot that cannot be read counts as listing everything (nothing is deleted)."""
        if sha256 in self._listed.get(tenant_id, ()):
            return True
        archived = await db.execute(
            select(
                SessionArchiveRow.session_id,
                SessionArchiveRow.snapshot_sha256,
                SessionArchiveRow.snapshot_bytes,
            ).where(SessionArchiveRow.tenant_id == tenant_id)
        )
        read = self._read.setdefault(tenant_id, set())
        listed = self._listed.setdefault(tenant_id, set())
        for session_id, snapshot, size in archived:
            if snapshot in read:
                continue
            try:
                listed |= await self._listed_by(tenant_id, session_id, snapshot, size)
            except Exception as err:  # a missing or bad snapshot must not free its results
                logger.warning(
                    "gc: could not read the snapshot of archived session %s (%s); "
                    "keeping the tenant's objects this pass",
                    session_id,
                    type(err).__name__,
                )
                return True
            read.add(snapshot)
        return sha256 in listed

    async def _listed_by(
        self, tenant_id: str, session_id: uuid.UUID, snapshot: str, size: int
    ) -> frozenset[str]:
        ref = self._store.ref_for(tenant_id, snapshot, size, SNAPSHOT_CONTENT_TYPE)
        self.snapshots_read += 1
        data = await self._store.get(tenant_id, ref)  # sha256-verified
        return listed_artifacts(unpack(data, tenant_id, session_id))
