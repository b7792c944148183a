"""Delayed mark-and-sweep of artifacts, plus orphan collection.

Mark: an artifact with no live reference becomes `unreachable` with a timestamp (and one
that gained a live reference again goes back to `active`). Sweep: only artifacts still
unreachable after the safety window lose their object, then their metadata. Orphans are
objects in the bucket with no metadata row (uploaded, never committed) older than the
window, and so are device uploads left in staging (storage.device_calls.STAGING_DIR: a
result is read from there once, at its completion, which deletes it; what a device wrote
after that, or under a lease that ended, is never read). A reference is live while
`required_for_resume` is set or `expires_at` has not passed (NULL means no expiry).

An archived session holds one ref, on its snapshot, which lists the artifacts its items name
(their rows left with the session: storage/archive_artifacts.py). An object whose row is gone
or unreachable is deleted only if no snapshot of a session still archived lists it
(storage/snapshot_lists.py, read under the content lock; archive deletes rows under it too).

Races with committers are closed by a per-(tenant, sha256) advisory lock: a committer
takes it, registers the row and confirms the object exists before committing (see
storage.artifact_commit); the collector takes it and re-checks liveness before deleting.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, or_, select, true, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.device_calls import STAGING_DIR
from durable_agents.storage.models import ArtifactRefRow, ArtifactRow
from durable_agents.storage.snapshot_lists import SnapshotLists

logger = logging.getLogger(__name__)

# Tenants whose objects are not described by agent_artifacts (e.g. offloaded Temporal
# payloads, kept as long as the workflow histories that name them) start with "_".
_KEY_RE = re.compile(r"^(?P<tenant>[^/]+)/sha256/[0-9a-f]{2}/[0-9a-f]{2}/(?P<sha>[0-9a-f]{64})$")
_STAGING_RE = re.compile(rf"^[^/]+/{STAGING_DIR}/")


@dataclass
class GcReport:
    dry_run: bool
    marked: int = 0
    revived: int = 0
    swept: list[tuple[str, str, int]] = field(default_factory=list)  # tenant, sha256, bytes
    orphans: list[tuple[str, int]] = field(default_factory=list)  # key, bytes
    staging: list[tuple[str, int]] = field(default_factory=list)  # key, bytes
    skipped: int = 0

    @property
    def bytes_reclaimed(self) -> int:
        uploads = sum(s for _, s in self.orphans) + sum(s for _, s in self.staging)
        return sum(s for *_, s in self.swept) + uploads


def _live_ref(now: datetime) -> Any:
    return exists().where(
        ArtifactRefRow.tenant_id == ArtifactRow.tenant_id,
        ArtifactRefRow.artifact_id == ArtifactRow.artifact_id,
        or_(
            ArtifactRefRow.required_for_resume.is_(True),
            ArtifactRefRow.expires_at.is_(None),
            ArtifactRefRow.expires_at > now,
        ),
    )


def _scope(tenant_id: str | None) -> Any:
    return ArtifactRow.tenant_id == tenant_id if tenant_id else true()


async def mark(
    db: AsyncSession, now: datetime, *, tenant_id: str | None = None, dry_run: bool = False
) -> tuple[int, int]:
    """Mark artifacts without live refs unreachable; revive marked ones that have one."""
    dead = and_(ArtifactRow.status == "active", ~_live_ref(now), _scope(tenant_id))
    revive = and_(ArtifactRow.status == "unreachable", _live_ref(now), _scope(tenant_id))
    if dry_run:
        count = select(ArtifactRow.artifact_id)
        marked = len((await db.scalars(count.where(dead))).all())
        revived = len((await db.scalars(count.where(revive))).all())
        return marked, revived
    marked_rows = await db.execute(
        update(ArtifactRow).where(dead).values(status="unreachable", unreachable_since=now)
    )
    revived_rows = await db.execute(
        update(ArtifactRow).where(revive).values(status="active", unreachable_since=None)
    )
    return marked_rows.rowcount, revived_rows.rowcount  # type: ignore[attr-defined]


async def _sweep_one(
    db: AsyncSession,
    store: ArtifactStore,
    row: ArtifactRow,
    cutoff: datetime,
    now: datetime,
    snapshots: SnapshotLists,
) -> bool:
    repo = ArtifactRepository(db, row.tenant_id)
    await repo.lock_content(row.sha256)
    still = await db.scalar(
        select(ArtifactRow)
        .where(
            ArtifactRow.tenant_id == row.tenant_id,
            ArtifactRow.artifact_id == row.artifact_id,
            ArtifactRow.status == "unreachable",
            ArtifactRow.unreachable_since < cutoff,
            ~_live_ref(now),
        )
        .with_for_update()
    )
    if still is None:
        return False  # revived or re-referenced since it was marked
    kept = await snapshots.lists(db, row.tenant_id, row.sha256)
    if not kept:
        # Object first: a crash after this leaves a row that the next sweep finishes.
        await _delete(store, store.ref_for(row.tenant_id, row.sha256, 0, "").key)
    await db.execute(
        delete(ArtifactRefRow).where(
            ArtifactRefRow.tenant_id == row.tenant_id,
            ArtifactRefRow.artifact_id == row.artifact_id,
        )
    )
    await db.execute(
        delete(ArtifactRow).where(
            ArtifactRow.tenant_id == row.tenant_id, ArtifactRow.artifact_id == row.artifact_id
        )
    )
    # An archived session's snapshot lists the bytes: only the row goes (its rehydrate
    # puts one back), and nothing is reclaimed.
    return not kept


async def _objects(
    store: ArtifactStore, tenant_id: str | None
) -> AsyncIterator[tuple[str, int, datetime]]:
    prefix = f"{store.prefix}/{tenant_id}/" if tenant_id else f"{store.prefix}/"
    paginator = store.client.get_paginator("list_objects_v2")
    async for page in paginator.paginate(Bucket=store.bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"], int(obj["Size"]), obj["LastModified"]


async def _delete(store: ArtifactStore, key: str) -> None:
    await store.client.delete_object(Bucket=store.bucket, Key=key)


async def _orphan_keys(
    store: ArtifactStore, cutoff: datetime, tenant_id: str | None
) -> tuple[list[tuple[str, str, str, int]], list[tuple[str, int]]]:
    """Content objects older than `cutoff` that may be orphans; staging objects as old."""
    found, staging = [], []
    async for key, size, modified in _objects(store, tenant_id):
        if modified >= cutoff:
            continue
        relative = key.removeprefix(f"{store.prefix}/")
        if _STAGING_RE.match(relative):
            staging.append((key, size))
            continue
        match = _KEY_RE.match(relative)
        if match is None or match["tenant"].startswith("_"):
            continue
        found.append((key, match["tenant"], match["sha"], size))
    return found, staging


async def collect(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore,
    *,
    now: datetime,
    window: timedelta,
    tenant_id: str | None = None,
    dry_run: bool = False,
) -> GcReport:
    """One GC pass: mark, sweep what stayed unreachable past the window, collect orphans.

    `tenant_id` limits the pass to one tenant; by default it covers all of them.
    """
    report = GcReport(dry_run=dry_run)
    cutoff = now - window
    snapshots = SnapshotLists(store)
    async with sessions() as db, db.begin():
        report.marked, report.revived = await mark(db, now, tenant_id=tenant_id, dry_run=dry_run)
    async with sessions() as db:
        candidates = list(
            await db.scalars(
                select(ArtifactRow).where(
                    ArtifactRow.status == "unreachable",
                    ArtifactRow.unreachable_since < cutoff,
                    _scope(tenant_id),
                )
            )
        )
    for row in candidates:
        if dry_run:
            async with sessions() as db:
                if not await snapshots.lists(db, row.tenant_id, row.sha256):
                    report.swept.append((row.tenant_id, row.sha256, row.size_bytes))
            continue
        try:
            async with sessions() as db, db.begin():
                if await _sweep_one(db, store, row, cutoff, now, snapshots):
                    report.swept.append((row.tenant_id, row.sha256, row.size_bytes))
                else:
                    report.skipped += 1
        except Exception:  # one bad row must not stop the pass; it is retried next time
            logger.exception("could not sweep artifact %s/%s", row.tenant_id, row.sha256)
            report.skipped += 1
    orphans, staging = await _orphan_keys(store, cutoff, tenant_id)
    for key, size in staging:
        if not dry_run:
            await _delete(store, key)
        report.staging.append((key, size))
    for key, tenant, sha, size in orphans:
        async with sessions() as db, db.begin():
            repo = ArtifactRepository(db, tenant)
            await repo.lock_content(sha)
            described = await db.scalar(
                select(ArtifactRow.artifact_id).where(
                    ArtifactRow.tenant_id == tenant, ArtifactRow.sha256 == sha
                )
            )
            if described is not None or await snapshots.lists(db, tenant, sha):
                continue
            if not dry_run:
                await _delete(store, key)
            report.orphans.append((key, size))
    logger.info(
        "gc%s: marked %d, revived %d, swept %d, orphans %d, staging %d, %d bytes",
        " (dry run)" if dry_run else "",
        report.marked,
        report.revived,
        len(report.swept),
        len(report.orphans),
        len(report.staging),
        report.bytes_reclaimed,
    )
    return report
