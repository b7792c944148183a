"""An archived session's artifacts: listed in its snapshot, not held row by row.

Archive moves the rows of the artifacts the session's items name into the snapshot
("artifacts") and drops the session's own refs on them; the session then holds one
required-for-resume ref, on its snapshot (storage/archive.py). A row another holder still
needs stays: a ref of another owner, or an item of another (hot) session. The objects stay
in S3: GC reads the lists of the archived sessions' snapshots before it deletes an object
without a row (storage/snapshot_lists.py). Rehydrate puts rows and refs back.

Runs inside archive's and rehydrate's final transactions, under the session lock.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifact_records import SCHEMA_VERSION
from durable_agents.storage.models import ArtifactRefRow, ArtifactRow, ItemRow

# The refs tool results, user messages and delegations take on their session's artifacts.
_SESSION_OWNER_TYPE = "checkpoint"


async def _lock_contents(db: AsyncSession, tenant_id: str, shas: list[str]) -> None:
    """storage.artifact_records.ArtifactRepository.lock_content for each, in one round trip
    and in a fixed order (two archives sharing content never deadlock)."""
    await db.execute(
        text(
            "SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) "
            "FROM unnest(CAST(:keys AS text[])) AS k ORDER BY k"
        ),
        {"keys": sorted(f"{tenant_id}:{s}" for s in shas)},
    )


async def release_to_snapshot(
    db: AsyncSession, tenant_id: str, session_id: uuid.UUID, artifacts: list[dict[str, Any]]
) -> int:
    """Drop the session's refs on `artifacts` (the snapshot lists them now) and the rows no
    one else needs. Call after the session's items are deleted. Returns rows deleted."""
    if not artifacts:
        return 0
    # Taken like a collector's sweep: no commit can register a ref on a row being deleted.
    await _lock_contents(db, tenant_id, [a["sha256"] for a in artifacts])
    ids = [uuid.UUID(a["artifact_id"]) for a in artifacts]
    await db.execute(
        delete(ArtifactRefRow).where(
            ArtifactRefRow.tenant_id == tenant_id,
            ArtifactRefRow.owner_type == _SESSION_OWNER_TYPE,
            ArtifactRefRow.owner_id == str(session_id),
            ArtifactRefRow.artifact_id.in_(ids),
        )
    )
    held_by_ref = exists().where(
        ArtifactRefRow.tenant_id == ArtifactRow.tenant_id,
        ArtifactRefRow.artifact_id == ArtifactRow.artifact_id,
    )
    named_by_item = exists().where(  # ix_items_artifact
        ItemRow.tenant_id == ArtifactRow.tenant_id,
        ItemRow.artifact_id == ArtifactRow.artifact_id,
    )
    gone = await db.execute(
        delete(ArtifactRow).where(
            ArtifactRow.tenant_id == tenant_id,
            ArtifactRow.artifact_id.in_(ids),
            ~held_by_ref,
            ~named_by_item,
        )
    )
    return int(gone.rowcount)  # type: ignore[attr-defined]


async def restore_from_snapshot(
    db: AsyncSession, tenant_id: str, session_id: uuid.UUID, snap: dict[str, Any]
) -> None:
    """Put back the rows of the artifacts the snapshot lists and the session's refs on
    them, before its items are restored. The same bytes registered again meanwhile have a
    row of their own: the snapshot's items are pointed at that one (in `snap`)."""
    listed = snap.get("artifacts") or []
    if not listed:
        return  # schema 1: the session kept its rows and refs
    await _lock_contents(db, tenant_id, [a["sha256"] for a in listed])
    rows = [
        {
            "tenant_id": tenant_id,
            "artifact_id": uuid.UUID(a["artifact_id"]),
            "sha256": a["sha256"],
            "content_type": a["content_type"],
            "size_bytes": a["size_bytes"],
            "schema_version": a.get("schema_version", SCHEMA_VERSION),
            "status": "active",
            "created_at": datetime.fromisoformat(a["created_at"]),
        }
        for a in listed
    ]
    # Any unique key may conflict: the row stayed (shared), or the bytes have a new one.
    await db.execute(insert(ArtifactRow).values(rows).on_conflict_do_nothing())
    shas = [a["sha256"] for a in listed]
    found = dict(
        (
            await db.execute(
                update(ArtifactRow)
                .where(ArtifactRow.tenant_id == tenant_id, ArtifactRow.sha256.in_(shas))
                .values(status="active", unreachable_since=None)
                .returning(ArtifactRow.sha256, ArtifactRow.artifact_id)
            )
        ).all()
    )
    now_id = {a["artifact_id"]: str(found[a["sha256"]]) for a in listed if a["sha256"] in found}
    for item in snap["items"]:
        if item["artifact_id"] in now_id:
            item["artifact_id"] = now_id[item["artifact_id"]]
    held = sorted({uuid.UUID(i["artifact_id"]) for i in snap["items"] if i["artifact_id"]})
    if held:
        refs = [
            {"tenant_id": tenant_id, "owner_type": _SESSION_OWNER_TYPE,
             "owner_id": str(session_id), "artifact_id": a,
             "required_for_resume": True, "expires_at": None}
            for a in held
        ]  # fmt: skip
        await db.execute(
            insert(ArtifactRefRow)
            .values(refs)
            .on_conflict_do_update(
                index_elements=["tenant_id", "owner_type", "owner_id", "artifact_id"],
                set_={"required_for_resume": True, "expires_at": None},
            )
        )
