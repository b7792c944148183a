"""Holds on artifacts that histories outside our own loop name (the claim check).

Another SDK's workflow (an OpenAI Agents or pydantic-ai agent with the claim-check plugin,
workers/peers/claim_check.py) keeps large strings in its history as references to artifacts. A
hold says "the history of this owner may name this object": one agent_artifact_refs row,
owner_type `workflow_history`, owner_id the owner's name (to us an opaque string). It is
written in the same transaction that registers the object (after the object was uploaded
and verified), before the reference can reach any history, so the collector (storage.gc)
sees it as a live ref and keeps the object.

A hold is live while its expires_at is NULL. Whoever knows when the owner's histories stop
being readable sets it (`settle`): NULL again while an owner is open, the end of its
retention once it closed. Writing a hold again re-opens it, so an owner name reused by a
new run is never collected on the strength of the old one's retention. Holds are rows, not
a second GC: mark, the safety window and sweep are the artifacts' own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.models import ArtifactRefRow
from durable_agents.vocabulary.artifact_ref import ArtifactRef

OWNER_TYPE = "workflow_history"


@dataclass(frozen=True)
class Held:
    """An uploaded, verified object and the bytes it holds (re-uploaded if a sweep won)."""

    ref: ArtifactRef
    content: bytes


@dataclass(frozen=True)
class HeldOwner:
    tenant_id: str
    owner_id: str
    # The newest hold's time (the database's clock): younger holds are never released.
    newest: datetime


async def hold(db: AsyncSession, store: ArtifactStore, objects: Sequence[Held], owner: str) -> None:
    """Register each object and hold it for `owner`, in this unit of work.

    Content locks are taken in sha256 order: two encoders holding the same objects in
    another order must not deadlock.
    """
    for item in sorted(objects, key=lambda h: (h.ref.tenant_id, h.ref.sha256)):
        artifact_id = await register_uploaded(db, store, item.ref, item.content)
        row = insert(ArtifactRefRow).values(
            tenant_id=item.ref.tenant_id,
            owner_type=OWNER_TYPE,
            owner_id=owner,
            artifact_id=artifact_id,
            required_for_resume=False,
            expires_at=None,
        )
        await db.execute(
            row.on_conflict_do_update(
                index_elements=["tenant_id", "owner_type", "owner_id", "artifact_id"],
                set_={"expires_at": None, "created_at": func.now()},
            )
        )


async def owners_to_settle(
    db: AsyncSession, now: datetime, *, prefix: str = "", limit: int = 1000
) -> list[HeldOwner]:
    """Owners with a hold never settled, or settled to a time that has come (confirmed once
    more before it lapses: the owner may have been reused since). `prefix`: owner ids
    starting with it only."""
    rows = await db.execute(
        select(
            ArtifactRefRow.tenant_id,
            ArtifactRefRow.owner_id,
            func.max(ArtifactRefRow.created_at),
        )
        .where(
            ArtifactRefRow.owner_type == OWNER_TYPE,
            ArtifactRefRow.owner_id.startswith(prefix, autoescape=True),
            or_(ArtifactRefRow.expires_at.is_(None), ArtifactRefRow.expires_at <= now),
        )
        .group_by(ArtifactRefRow.tenant_id, ArtifactRefRow.owner_id)
        .order_by(ArtifactRefRow.tenant_id, ArtifactRefRow.owner_id)
        .limit(limit)
    )
    return [HeldOwner(t, o, newest) for t, o, newest in rows.all()]


async def settle(
    db: AsyncSession, tenant_id: str, owner_id: str, expires_at: datetime | None
) -> int:
    """Every hold of the owner lapses at `expires_at` (None: held until settled again)."""
    result = await db.execute(
        update(ArtifactRefRow)
        .where(
            ArtifactRefRow.tenant_id == tenant_id,
            ArtifactRefRow.owner_type == OWNER_TYPE,
            ArtifactRefRow.owner_id == owner_id,
        )
        .values(expires_at=expires_at)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


async def release(db: AsyncSession, tenant_id: str, owner_id: str, held_before: datetime) -> int:
    """Drop the owner's holds written before `held_before`: nothing can read them any more.

    A younger hold stays (an owner reused a moment ago, its start input held before the
    run existed) and is looked at again by the next pass.
    """
    result = await db.execute(
        delete(ArtifactRefRow).where(
            ArtifactRefRow.tenant_id == tenant_id,
            ArtifactRefRow.owner_type == OWNER_TYPE,
            ArtifactRefRow.owner_id == owner_id,
            ArtifactRefRow.created_at < held_before,
        )
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


async def holds_of(db: AsyncSession, tenant_id: str, owner_id: str) -> list[ArtifactRefRow]:
    """The owner's holds (for checks and tools)."""
    rows = await db.scalars(
        select(ArtifactRefRow).where(
            ArtifactRefRow.tenant_id == tenant_id,
            ArtifactRefRow.owner_type == OWNER_TYPE,
            ArtifactRefRow.owner_id == owner_id,
        )
    )
    return list(rows)
