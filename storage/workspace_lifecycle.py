"""A session workspace through the session's life: packed when the session is archived,
put back when it is needed again, and swept from disk when nothing needs it.

While packed, the session row names the pack (``workspace_sha256``) and a
required-for-resume ref keeps the artifact; the directory is removed only after the pack
was proven to restore (workspace_pack.pack_proven), is committed, and only if the tree
still packs to the same sha256, so nothing is lost. A pack that had to leave something
out (entries past the path limits, links no restore may recreate) keeps the directory on
disk for good, and lists what it left out for the operator. Restoring happens under the
session row lock, as does sweeping, so the two never race.
"""

from __future__ import annotations

import asyncio
import logging
import stat
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import ArtifactStore, check_tenant
from durable_agents.storage.errors import InvalidTenant
from durable_agents.storage.models import SessionRow
from durable_agents.storage.workspace_pack import (
    PACK_CONTENT_TYPE,
    LeftOut,
    Pack,
    WorkspaceNotPackable,
    pack_proven,
    packed_state,
    unpack_into,
)
from durable_agents.storage.workspace_tree import remove_tree
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.vocabulary.artifact_ref import ArtifactRef

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackedWorkspace:
    root: Path
    ref: ArtifactRef
    data: bytes
    pack: Pack

    @property
    def left_out(self) -> tuple[LeftOut, ...]:
        return self.pack.left_out


def own_root(layout: WorkspaceLayout, tenant_id: str, session: dict[str, Any]) -> Path | None:
    """The directory only this session (and its sub-agents) uses, or None if it shares one
    (tenant or project scope) or is a sub-agent (its root session owns the directory)."""
    session_id = uuid.UUID(str(session["id"]))
    if session.get("root_id") not in (None, str(session_id), session_id):
        return None
    if layout.scope == "tenant" or (layout.scope == "project" and session.get("project")):
        return None
    return layout.session_root(tenant_id, session_id)


def _pack(root: Path, scratch: Path) -> tuple[Path, bytes, Pack] | None:
    try:
        mode = root.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        # Packing would follow it to whatever it names, and removal would then lose the
        # session's real directory or remove another one.
        raise WorkspaceNotPackable("the workspace root is a symbolic link; it was left alone")
    if not stat.S_ISDIR(mode):
        return None
    out = scratch / f".pack-{root.name}.tar.gz"
    try:
        pack = pack_proven(root, out, scratch)
        return out, out.read_bytes(), pack
    except BaseException:
        out.unlink(missing_ok=True)
        raise


async def pack_workspace(
    store: ArtifactStore, layout: WorkspaceLayout, tenant_id: str, session: dict[str, Any]
) -> PackedWorkspace | None:
    """Upload the session's own workspace as a verified artifact; None if it has none.

    Raises WorkspaceNotPackable (nothing uploaded, nothing changed) if no pack of it can be
    proven to restore."""
    root = own_root(layout, tenant_id, session)
    if root is None:
        return None
    packed = await asyncio.to_thread(_pack, root, root.parent)
    if packed is None:
        return None
    path, data, pack = packed
    try:
        ref = await store.put(tenant_id, data, PACK_CONTENT_TYPE)
    finally:
        path.unlink(missing_ok=True)
    return PackedWorkspace(root, ref, data, pack)


async def record_packed(
    db: AsyncSession, store: ArtifactStore, session_id: uuid.UUID, packed: PackedWorkspace
) -> uuid.UUID:
    """In the archive's unit of work: register the pack and mark the session as packed.
    Returns the artifact id, which the caller holds with a required-for-resume ref."""
    artifact_id = await register_uploaded(db, store, packed.ref, packed.data)
    await db.execute(
        update(SessionRow)
        .where(SessionRow.id == session_id, SessionRow.tenant_id == packed.ref.tenant_id)
        .values(workspace_sha256=packed.ref.sha256, workspace_bytes=packed.ref.size_bytes)
    )
    return artifact_id


def _remove_if_unchanged(root: Path, sha256: str) -> bool:
    if not stat.S_ISDIR(root.lstat().st_mode):
        return False
    now = packed_state(root, root.parent)
    if now.sha256 != sha256 or not now.complete:
        logger.warning("workspace %s changed after it was packed; kept on disk", root.name)
        return False
    remove_tree(root)
    return True


async def remove_packed(packed: PackedWorkspace) -> bool:
    """After the archive committed: remove the directory if its pack is complete (nothing
    was left out) and the tree still packs to it. False: the directory is kept."""
    if not packed.pack.complete:
        logger.warning(
            "workspace %s kept on disk: its pack left out %d entries",
            packed.root.name,
            packed.pack.left_out_count,
        )
        return False
    try:
        return await asyncio.to_thread(_remove_if_unchanged, packed.root, packed.ref.sha256)
    except FileNotFoundError:
        return True  # removed meanwhile (a concurrent archive of the same session)


async def restore_workspace(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore,
    layout: WorkspaceLayout,
    tenant_id: str,
    root_session_id: uuid.UUID,
) -> bool:
    """Put a packed workspace back on disk and clear the mark; False if none was packed.

    A directory already there (a removal that did not happen) is kept as it is.
    """
    async with sessions() as db, db.begin():
        row = await db.scalar(
            select(SessionRow)
            .where(SessionRow.id == root_session_id, SessionRow.tenant_id == tenant_id)
            .with_for_update()
        )
        if row is None or row.workspace_sha256 is None:
            return False
        ref = store.ref_for(
            tenant_id, row.workspace_sha256, row.workspace_bytes or 0, PACK_CONTENT_TYPE
        )
        data = await store.get(tenant_id, ref)  # verified against the sha256
        root = layout.session_root(tenant_id, root_session_id)
        await asyncio.to_thread(unpack_into, data, root)
        row.workspace_sha256 = row.workspace_bytes = None
        await ArtifactRepository(db, tenant_id).release_checkpoint(ref.sha256, str(root_session_id))
    return True


async def restore_if_packed(
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore,
    layout: WorkspaceLayout,
    tenant_id: str,
    session: SessionRow,
) -> None:
    """Before a tool runs: bring the session's workspace back if archive packed it."""
    root_id = session.root_id or session.id
    if layout.root_for(tenant_id, session) != layout.session_root(tenant_id, root_id):
        return  # a shared (tenant or project) workspace is never packed
    await restore_workspace(sessions, store, layout, tenant_id, root_id)


# --- sweeping -------------------------------------------------------------------------


@dataclass
class WorkspaceSweep:
    removed: list[Path] = field(default_factory=list)
    kept: int = 0


def _session_dirs(base: Path) -> list[tuple[str, uuid.UUID, Path]]:
    found: list[tuple[str, uuid.UUID, Path]] = []
    if not base.is_dir():
        return found
    for tenant_dir in sorted(base.iterdir()):
        try:
            check_tenant(tenant_dir.name)
        except InvalidTenant:
            continue
        if not stat.S_ISDIR(tenant_dir.lstat().st_mode):
            continue
        for entry in sorted(tenant_dir.iterdir()):
            try:
                session_id = uuid.UUID(entry.name)
            except ValueError:
                continue  # _tenant, _projects, restores in progress
            if stat.S_ISDIR(entry.lstat().st_mode) and str(session_id) == entry.name:
                found.append((tenant_dir.name, session_id, entry))
    return found


def _needless(path: Path, cutoff: datetime, *, exists: bool, packed: str | None) -> bool:
    """Whether nothing needs the directory: its session is gone (and it is older than the
    cutoff), or it is the leftover of a pack that alone stands for it (nothing left out)."""
    if not exists:
        return datetime.fromtimestamp(path.lstat().st_mtime, UTC) < cutoff
    if packed is None:
        return False
    state = packed_state(path, path.parent)
    return state.complete and state.sha256 == packed


async def sweep_workspaces(
    sessions: async_sessionmaker[AsyncSession],
    layout: WorkspaceLayout,
    *,
    now: datetime,
    window: timedelta,
    tenant_id: str | None = None,
    dry_run: bool = False,
) -> WorkspaceSweep:
    """Remove session workspaces nothing needs, once they are older than ``window``:
    those of sessions that no longer exist, and leftovers of packed (archived) sessions
    that still match their pack. Shared tenant and project workspaces are never touched."""
    cutoff = now - window
    report = WorkspaceSweep()
    for tenant, session_id, path in await asyncio.to_thread(_session_dirs, layout.base):
        if tenant_id is not None and tenant != tenant_id:
            continue
        async with sessions() as db, db.begin():
            row = await db.scalar(
                select(SessionRow)
                .where(SessionRow.id == session_id, SessionRow.tenant_id == tenant)
                .with_for_update()
            )
            packed = None
            if row is not None and row.updated_at < cutoff:
                packed = row.workspace_sha256
            try:
                gone = await asyncio.to_thread(
                    _needless, path, cutoff, exists=row is not None, packed=packed
                )
                if gone and not dry_run:
                    await asyncio.to_thread(remove_tree, path)
            except OSError as err:
                # One directory that cannot be read or removed must not stop the sweep.
                logger.warning("workspace %s kept (%s)", path.name, type(err).__name__)
                gone = False
            if not gone:
                report.kept += 1
                continue
            report.removed.append(path)
    return report
