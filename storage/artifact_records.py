"""Artifact metadata repository (agent_artifacts, agent_artifact_refs). Never commits.

Rows are written only for refs the ArtifactStore has already uploaded and verified.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import String, cast, exists, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.errors import ArtifactNotFound
from durable_agents.storage.models import OWNER_TYPES, ArtifactRefRow, ArtifactRow, SessionRow
from durable_agents.vocabulary.artifact_ref import ArtifactRef

SCHEMA_VERSION = 1


class ArtifactRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def lock_content(self, sha256: str) -> None:
        """Serialise, until the transaction ends, everyone who registers or deletes these
        bytes: commits of new refs and the garbage collector's sweeps."""
        await self._db.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
            {"k": f"{self._tenant}:{sha256}"},
        )

    async def register(self, ref: ArtifactRef, *, uri: str | None = None) -> uuid.UUID:
        """Record a verified object; the same bytes map to the same artifact_id.

        A row the collector marked unreachable becomes active again: it is wanted. `uri` is
        optional and our writers leave it out: ArtifactStore.uri derives the location from
        the ref, so storing it would repeat ~130 bytes per artifact.
        """
        if ref.tenant_id != self._tenant:
            raise ArtifactNotFound("artifact belongs to another tenant")
        # DO UPDATE returns the row whether it was inserted or already there: one round trip.
        artifact_id: uuid.UUID | None = await self._db.scalar(
            insert(ArtifactRow)
            .values(
                artifact_id=uuid.uuid4(),
                tenant_id=self._tenant,
                sha256=ref.sha256,
                uri=uri,
                content_type=ref.content_type,
                size_bytes=ref.size_bytes,
                schema_version=SCHEMA_VERSION,
                status="active",
            )
            .on_conflict_do_update(
                index_elements=[ArtifactRow.tenant_id, ArtifactRow.sha256],
                set_={"status": "active", "unreachable_since": None},
            )
            .returning(ArtifactRow.artifact_id)
        )
        if artifact_id is None:  # DO UPDATE always returns a row; a guard for the type
            raise ArtifactNotFound(f"artifact {ref.sha256} was not registered")
        return artifact_id

    async def add_ref(
        self,
        artifact_id: uuid.UUID,
        *,
        owner_type: str,
        owner_id: str,
        required_for_resume: bool,
        expires_at: datetime | None = None,
    ) -> None:
        if owner_type not in OWNER_TYPES:
            raise ValueError(f"unknown owner_type {owner_type!r}")
        await self._db.execute(
            insert(ArtifactRefRow)
            .values(
                tenant_id=self._tenant,
                artifact_id=artifact_id,
                owner_type=owner_type,
                owner_id=owner_id,
                required_for_resume=required_for_resume,
                expires_at=expires_at,
            )
            .on_conflict_do_nothing()
        )

    async def release_ref(
        self, artifact_id: uuid.UUID, *, owner_type: str, owner_id: str, expires_at: datetime
    ) -> bool:
        """Stop requiring an artifact for resume; it stays referenced until `expires_at`."""
        result = await self._db.execute(
            update(ArtifactRefRow)
            .where(
                ArtifactRefRow.tenant_id == self._tenant,
                ArtifactRefRow.artifact_id == artifact_id,
                ArtifactRefRow.owner_type == owner_type,
                ArtifactRefRow.owner_id == owner_id,
            )
            .values(required_for_resume=False, expires_at=expires_at)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def release_checkpoint(self, sha256: str, owner_id: str) -> bool:
        """A session no longer needs the object `sha256` to resume (the hot rows or the
        directory it stood for are the truth again): its checkpoint ref expires now, so the
        object goes once GC's window passes. False when there is no such artifact."""
        artifact_id = await self._db.scalar(
            select(ArtifactRow.artifact_id).where(
                ArtifactRow.tenant_id == self._tenant, ArtifactRow.sha256 == sha256
            )
        )
        if artifact_id is None:
            return False
        return await self.release_ref(
            artifact_id, owner_type="checkpoint", owner_id=owner_id, expires_at=datetime.now(UTC)
        )

    async def get(self, artifact_id: uuid.UUID) -> ArtifactRow:
        row = await self._db.scalar(
            select(ArtifactRow).where(
                ArtifactRow.tenant_id == self._tenant, ArtifactRow.artifact_id == artifact_id
            )
        )
        if row is None:
            raise ArtifactNotFound(f"artifact {artifact_id} not found")
        return row

    async def find_by_sha_prefix(self, prefix: str) -> ArtifactRow:
        """The one artifact whose sha256 starts with `prefix` (as shown in timelines)."""
        if len(prefix) < 8 or any(c not in "0123456789abcdef" for c in prefix):
            raise ArtifactNotFound(f"not an artifact id or sha256 prefix: {prefix!r}")
        rows = list(
            await self._db.scalars(
                select(ArtifactRow)
                .where(ArtifactRow.tenant_id == self._tenant, ArtifactRow.sha256.startswith(prefix))
                .limit(2)
            )
        )
        if not rows:
            raise ArtifactNotFound(f"no artifact with sha256 {prefix}…")
        if len(rows) > 1:
            raise ArtifactNotFound(f"sha256 prefix {prefix} is ambiguous; give more characters")
        return rows[0]

    async def in_tree(
        self,
        root_id: uuid.UUID,
        *,
        artifact_id: uuid.UUID | None = None,
        sha256_prefix: str | None = None,
        limit: int = 2,
    ) -> list[ArtifactRow]:
        """Artifacts named by id or sha256 prefix that a session of the tree under `root_id`
        holds (a checkpoint ref: its tool results, messages, delegations), at most `limit`.

        Nothing outside the tree is ever returned or counted, so a caller cannot learn
        whether another tree (or tenant) has such an artifact.
        """
        tree = select(cast(SessionRow.id, String)).where(
            SessionRow.tenant_id == self._tenant,
            or_(SessionRow.root_id == root_id, SessionRow.id == root_id),
        )
        held = exists().where(
            ArtifactRefRow.tenant_id == self._tenant,
            ArtifactRefRow.artifact_id == ArtifactRow.artifact_id,
            ArtifactRefRow.owner_type == "checkpoint",
            ArtifactRefRow.owner_id.in_(tree),
        )
        stmt = select(ArtifactRow).where(ArtifactRow.tenant_id == self._tenant, held)
        if artifact_id is not None:
            stmt = stmt.where(ArtifactRow.artifact_id == artifact_id)
        if sha256_prefix is not None:
            stmt = stmt.where(ArtifactRow.sha256.startswith(sha256_prefix, autoescape=True))
        return list(await self._db.scalars(stmt.order_by(ArtifactRow.sha256).limit(limit)))

    async def by_sha256(self, sha256s: Iterable[str]) -> dict[str, ArtifactRow]:
        """This tenant's records of the objects named by these sha256s; one it has no record
        of (another tenant's, or bytes never registered) is absent."""
        wanted = set(sha256s)
        if not wanted:
            return {}
        rows = await self._db.scalars(
            select(ArtifactRow).where(
                ArtifactRow.tenant_id == self._tenant, ArtifactRow.sha256.in_(wanted)
            )
        )
        return {r.sha256: r for r in rows}

    async def get_many(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, ArtifactRow]:
        wanted = set(ids)
        if not wanted:
            return {}
        rows = await self._db.scalars(
            select(ArtifactRow).where(
                ArtifactRow.tenant_id == self._tenant, ArtifactRow.artifact_id.in_(wanted)
            )
        )
        return {r.artifact_id: r for r in rows}

    async def refs_of(self, artifact_id: uuid.UUID) -> list[ArtifactRefRow]:
        rows = await self._db.scalars(
            select(ArtifactRefRow).where(
                ArtifactRefRow.tenant_id == self._tenant,
                ArtifactRefRow.artifact_id == artifact_id,
            )
        )
        return list(rows)
