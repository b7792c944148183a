"""The cold tier: a terminal session's hot rows moved to one gzip snapshot in object storage.

Archive reads the session, uploads a deterministic snapshot (content-addressed, so a retry
uploads nothing new), then in one transaction re-reads it under the session lock, and only if
nothing changed records the index row and a checkpoint ref and deletes the hot rows.
The session then holds one ref, on its snapshot: the artifacts its items name are listed in the
snapshot, not held row by row (storage/archive_artifacts.py). Rehydrate reverses that in one
transaction. A crash before either commit leaves the previous
state whole (at most an orphan object, which GC collects); after it, the new state is whole.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.archive_artifacts import release_to_snapshot, restore_from_snapshot
from durable_agents.storage.archive_snapshot import (
    SNAPSHOT_CONTENT_TYPE,
    TABLES,
    delete_hot,
    pack,
    read_snapshot,
    restore_hot,
    unpack,
)
from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.errors import SessionArchived, SessionNotFound, StorageError
from durable_agents.storage.models import ArtifactRefRow, SessionArchiveRow, SessionRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.workspace_lifecycle import (
    pack_workspace,
    record_packed,
    remove_packed,
    restore_workspace,
)
from durable_agents.storage.workspace_pack import LeftOut
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES, SessionStatus

logger = logging.getLogger(__name__)


class SessionNotArchivable(StorageError):
    """The session is not terminal (it may still run), so it stays in the hot tier."""

    error_type = "SessionNotArchivable"


class ArchiveConflict(StorageError):
    """The session changed between snapshot and commit; nothing was changed. Retry."""

    error_type = "ArchiveConflict"
    retryable = True


@dataclass(frozen=True)
class ArchiveResult:
    session_id: uuid.UUID
    snapshot_key: str
    snapshot_sha256: str
    snapshot_bytes: int
    item_count: int
    created: bool  # False: the session was already archived; nothing was done
    workspace_sha256: str | None = None  # the packed workspace, if one was on disk
    # What the pack could not hold (then the directory stays on disk): the first
    # MAX_LISTED entries and the count.
    workspace_left_out: tuple[LeftOut, ...] = ()
    workspace_left_out_count: int = 0

    @property
    def workspace_kept(self) -> bool:
        return self.workspace_left_out_count > 0


@dataclass(frozen=True)
class ArchiveFailure:
    session_id: uuid.UUID
    error_type: str
    message: str  # bounded; for the operator's terminal, never for workflow history


@dataclass
class IdleArchiveReport:
    archived: list[uuid.UUID] = field(default_factory=list)
    kept: list[ArchiveResult] = field(default_factory=list)  # archived, workspace on disk
    failed: list[ArchiveFailure] = field(default_factory=list)


@dataclass(frozen=True)
class RehydrateResult:
    session_id: uuid.UUID
    restored: bool  # False: the session was already hot; nothing was done
    status: str
    item_count: int


async def _status(
    db: AsyncSession, tenant_id: str, session_id: uuid.UUID, *, lock: bool = False
) -> str:
    """The session's status; with `lock`, the row stays locked (appends wait) until commit."""
    stmt = select(SessionRow.status).where(
        SessionRow.id == session_id, SessionRow.tenant_id == tenant_id
    )
    status = await db.scalar(stmt.with_for_update() if lock else stmt)
    if status is None:
        raise SessionNotFound(f"session {session_id} not found")
    return status


async def _index(db: AsyncSession, tenant_id: str, session_id: uuid.UUID) -> SessionArchiveRow:
    row = await db.scalar(
        select(SessionArchiveRow).where(
            SessionArchiveRow.tenant_id == tenant_id, SessionArchiveRow.session_id == session_id
        )
    )
    if row is None:
        raise StorageError(f"session {session_id} is archived but has no archive index row")
    return row


def _result(row: SessionArchiveRow, *, created: bool) -> ArchiveResult:
    return ArchiveResult(
        row.session_id, row.snapshot_key, row.snapshot_sha256, row.snapshot_bytes,
        row.item_count, created,
    )  # fmt: skip


async def _hold_refs(
    db: AsyncSession, tenant_id: str, session_id: uuid.UUID, refs: set[uuid.UUID]
) -> None:
    """Required-for-resume refs on the snapshot (which lists the artifacts its items point
    at, so GC keeps those too) and on a packed workspace."""
    rows = [
        {"tenant_id": tenant_id, "owner_type": "checkpoint", "owner_id": str(session_id),
         "artifact_id": a, "required_for_resume": True, "expires_at": None}
        for a in sorted(refs)
    ]  # fmt: skip
    stmt = insert(ArtifactRefRow).values(rows)
    # A ref released by an earlier rehydrate (identical snapshot) is required again.
    await db.execute(
        stmt.on_conflict_do_update(
            index_elements=[c.name for c in TABLES["agent_artifact_refs"].primary_key],
            set_={"required_for_resume": True, "expires_at": None},
        )
    )


async def _refuse_forked(db: AsyncSession, tenant_id: str, session_id: uuid.UUID) -> None:
    """A session whose items a fork shares stays hot, and so do its refs on their artifacts
    (storage/forks.py): SessionNotArchivable naming its first fork."""
    forks = await SessionRepository(db, tenant_id).forks(session_id)
    if forks:
        more = f" and {len(forks) - 1} more" if len(forks) > 1 else ""
        raise SessionNotArchivable(
            f"session {session_id} stays hot: fork {forks[0]}{more} shares its items"
        )


async def archive_session(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore,
    tenant_id: str,
    session_id: uuid.UUID,
    *,
    workspaces: WorkspaceLayout | None = None,
) -> ArchiveResult:
    """Move a terminal session's items, turns and compactions to one snapshot in S3.

    With ``workspaces`` (the cloud workers' layout), the session's own workspace directory
    is packed into a verified artifact held by the session, and removed from disk once that
    is committed (see storage.workspace_lifecycle); shared workspaces stay where they are.
    What the pack cannot hold is listed in the result and the directory then stays; a
    workspace no pack of which restores raises WorkspaceNotPackable with nothing changed.

    Idempotent: an archived session returns its existing archive. Raises SessionNotArchivable
    for a session that is not completed/failed/cancelled, and the retryable ArchiveConflict if
    the session changed while its snapshot was uploaded (then nothing was deleted).
    """
    async with sessions() as db:
        # One consistent view of the session and all its rows.
        await db.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        snap = await read_snapshot(db, tenant_id, session_id)
        status = snap["session"]["status"]
        if status == SessionStatus.ARCHIVED:
            return _result(await _index(db, tenant_id, session_id), created=False)
    if status not in TERMINAL_STATUSES:
        raise SessionNotArchivable(f"session {session_id} is {status}; only ended ones archive")
    async with sessions() as db:
        await _refuse_forked(db, tenant_id, session_id)
    packed = pack(snap)
    ref = await store.put(tenant_id, packed, SNAPSHOT_CONTENT_TYPE)
    workspace = None
    if workspaces is not None:
        workspace = await pack_workspace(store, workspaces, tenant_id, snap["session"])
    async with sessions() as db, db.begin():
        if await _status(db, tenant_id, session_id, lock=True) == SessionStatus.ARCHIVED:
            return _result(await _index(db, tenant_id, session_id), created=False)
        # Under the session lock: a fork committing now waits for it to be taken or ends first.
        await _refuse_forked(db, tenant_id, session_id)
        fresh = await read_snapshot(db, tenant_id, session_id)
        if any(fresh[k] != snap[k] for k in ("session", "turns", "items", "compactions")):
            raise ArchiveConflict(f"session {session_id} changed while archiving; retry")
        index = SessionArchiveRow(
            tenant_id=tenant_id,
            session_id=session_id,
            snapshot_key=ref.key,
            snapshot_sha256=ref.sha256,
            snapshot_bytes=ref.size_bytes,
            item_count=len(snap["items"]),
        )
        db.add(index)
        # Takes the content lock, so a GC sweep cannot remove the object before we commit.
        snapshot_id = await register_uploaded(db, store, ref, packed)
        held = {snapshot_id}
        if workspace is not None:
            held.add(await record_packed(db, store, session_id, workspace))
        await _hold_refs(db, tenant_id, session_id, held)
        await delete_hot(db, tenant_id, session_id)
        await release_to_snapshot(db, tenant_id, session_id, snap["artifacts"])
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id == session_id, SessionRow.tenant_id == tenant_id)
            .values(status=SessionStatus.ARCHIVED, updated_at=func.now())
        )
        await db.flush()
        result = _result(index, created=True)
    if workspace is None:
        return result
    await remove_packed(workspace)
    return dataclasses.replace(
        result,
        workspace_sha256=workspace.ref.sha256,
        workspace_left_out=workspace.left_out,
        workspace_left_out_count=workspace.pack.left_out_count,
    )


async def rehydrate_session(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore,
    tenant_id: str,
    session_id: uuid.UUID,
    *,
    workspaces: WorkspaceLayout | None = None,
) -> RehydrateResult:
    """Bring an archived session back to the hot tables exactly as it was (ids, ordinals,
    timestamps, status). Idempotent: a hot session is left alone. The snapshot object stays;
    its ref stops being required for resume, so GC may collect it later.

    With ``workspaces``, a packed workspace is put back on disk too. Without (a reader that
    has no workspace disk), it stays packed and held, and the next tool call of the session
    on a cloud worker restores it first."""
    async with sessions() as db:
        status = await _status(db, tenant_id, session_id)
        if status != SessionStatus.ARCHIVED:
            if workspaces is not None:  # an earlier rehydrate may have left it packed
                await restore_workspace(sessions, store, workspaces, tenant_id, session_id)
            return RehydrateResult(session_id, False, status, 0)
        index = await _index(db, tenant_id, session_id)
    ref = ArtifactRef(
        tenant_id=tenant_id,
        sha256=index.snapshot_sha256,
        key=index.snapshot_key,
        size_bytes=index.snapshot_bytes,
        content_type=SNAPSHOT_CONTENT_TYPE,
    )
    snap = unpack(await store.get(tenant_id, ref), tenant_id, session_id)
    async with sessions() as db, db.begin():
        status = await _status(db, tenant_id, session_id, lock=True)
        if status != SessionStatus.ARCHIVED:  # a concurrent rehydrate restored it first
            return RehydrateResult(session_id, False, status, 0)
        if (await _index(db, tenant_id, session_id)).snapshot_sha256 != index.snapshot_sha256:
            raise ArchiveConflict(f"session {session_id} was re-archived meanwhile; retry")
        await restore_from_snapshot(db, tenant_id, session_id, snap)
        prior_status = await restore_hot(db, tenant_id, session_id, snap)
        await db.execute(
            delete(SessionArchiveRow).where(
                SessionArchiveRow.tenant_id == tenant_id,
                SessionArchiveRow.session_id == session_id,
            )
        )
        await ArtifactRepository(db, tenant_id).release_checkpoint(
            index.snapshot_sha256, str(session_id)
        )
    if workspaces is not None:
        await restore_workspace(sessions, store, workspaces, tenant_id, session_id)
    return RehydrateResult(session_id, True, prior_status, len(snap["items"]))


async def archive_idle_sessions(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore,
    tenant_id: str,
    *,
    idle_for: timedelta,
    limit: int = 100,
    workspaces: WorkspaceLayout | None = None,
) -> IdleArchiveReport:
    """Archive up to `limit` ended sessions not updated for `idle_for`, oldest first.

    A session that changed or resumed meanwhile is skipped; one that fails is reported in
    ``failed`` and the run goes on with the others: one bad session never blocks a tenant.
    """
    async with sessions() as db:
        ids = list(
            await db.scalars(
                select(SessionRow.id)
                .where(
                    SessionRow.tenant_id == tenant_id,
                    SessionRow.status.in_(TERMINAL_STATUSES),
                    SessionRow.updated_at < func.now() - idle_for,
                )
                .order_by(SessionRow.updated_at, SessionRow.id)
                .limit(limit)
            )
        )
    report = IdleArchiveReport()
    for session_id in ids:
        try:
            result = await archive_session(
                sessions, store, tenant_id, session_id, workspaces=workspaces
            )
        except (ArchiveConflict, SessionNotArchivable) as err:
            logger.info("not archiving %s now: %s", session_id, err)
            continue
        except Exception as err:
            report.failed.append(_failure(session_id, err))
            # The type only: an OSError's text may quote a path a model chose.
            logger.warning("archiving %s failed (%s)", session_id, report.failed[-1].error_type)
            continue
        if result.created:
            report.archived.append(session_id)
            if result.workspace_kept:
                report.kept.append(result)
    return report


def _failure(session_id: uuid.UUID, err: Exception) -> ArchiveFailure:
    kind = err.error_type if isinstance(err, StorageError) else type(err).__name__
    text = str(err)
    return ArchiveFailure(session_id, kind, text if len(text) <= 300 else text[:300] + "...")


async def ensure_hot(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore,
    tenant_id: str,
    session_id: uuid.UUID,
) -> bool:
    """Rehydrate the session if it is archived; returns whether it did."""
    return (await rehydrate_session(sessions, store, tenant_id, session_id)).restored


async def rehydrate_for_read(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore | None,
    tenant_id: str,
    session_id: uuid.UUID,
) -> None:
    """For a reader that found the session archived: bring it back, or say why it cannot."""
    if store is None:
        raise SessionArchived(
            f"session {session_id} is archived in object storage; read it with an artifact "
            "store (it is rehydrated on read) or call storage.archive.ensure_hot first"
        )
    await ensure_hot(sessions, store, tenant_id, session_id)
