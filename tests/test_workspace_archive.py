"""A session's workspace follows the session into the cold tier and back, and GC removes
only workspace directories nothing needs."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select

from durable_agents.storage.archive import archive_session, rehydrate_session
from durable_agents.storage.models import ArtifactRefRow, SessionRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.workspace_lifecycle import restore_workspace, sweep_workspaces
from durable_agents.storage.workspace_pack import unpack_into
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workers.resources import Resources


async def _ended_session(res: Resources, tenant: str) -> uuid.UUID:
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        repo = SessionRepository(db, tenant)
        await repo.create(sid, title="ws", model_config={})
        await repo.set_status(sid, "completed")
    return sid


def _fill(root: Path) -> None:
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/app.py").write_text("print('hi ✓')\n")
    (root / "data.bin").write_bytes(bytes(range(256)) * 300)
    (root / "empty-dir").mkdir()
    (root / "link-to-app").symlink_to("src/pkg/app.py")
    (root / ".agent/effects").mkdir(parents=True)
    (root / ".agent/effects/abc.json").write_text('{"path": "x"}')
    os.chmod(root / "src/pkg/app.py", 0o640)


def _tree(root: Path) -> dict[str, tuple[str, object]]:
    """Everything a user would call the workspace: kinds, bytes, link targets, modes."""
    out: dict[str, tuple[str, object]] = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", None)
            else:
                out[rel] = ("file", (path.read_bytes(), path.stat().st_mode & 0o777))
    return out


async def _marker(res: Resources, tenant: str, sid: uuid.UUID) -> str | None:
    async with res.sessions() as db:
        row = await SessionRepository(db, tenant).get(sid)
        return row.workspace_sha256


async def test_archive_packs_the_workspace_removes_it_and_rehydrate_brings_it_back_identical(
    resources: Resources, tmp_path: Path, tenant: str
) -> None:
    layout = WorkspaceLayout(tmp_path / "base")
    sid = await _ended_session(resources, tenant)
    root = layout.session_root(tenant, sid)
    root.mkdir(parents=True)
    _fill(root)
    before = _tree(root)

    archived = await archive_session(resources.sessions, resources.store, tenant, sid,
                                     workspaces=layout)  # fmt: skip
    assert archived.workspace_sha256 is not None
    assert not root.exists(), "the packed workspace was left on disk"
    assert await _marker(resources, tenant, sid) == archived.workspace_sha256
    async with resources.sessions() as db:
        held = await db.scalars(
            select(ArtifactRefRow.required_for_resume).where(
                ArtifactRefRow.tenant_id == tenant, ArtifactRefRow.owner_id == str(sid)
            )
        )
        assert all(held)

    restored = await rehydrate_session(resources.sessions, resources.store, tenant, sid,
                                       workspaces=layout)  # fmt: skip
    assert restored.restored
    assert _tree(root) == before
    assert await _marker(resources, tenant, sid) is None


async def test_a_reader_without_the_workspace_disk_leaves_it_packed_until_a_worker_needs_it(
    resources: Resources, tmp_path: Path, tenant: str
) -> None:
    layout = WorkspaceLayout(tmp_path / "base")
    sid = await _ended_session(resources, tenant)
    root = layout.session_root(tenant, sid)
    root.mkdir(parents=True)
    _fill(root)
    before = _tree(root)
    await archive_session(resources.sessions, resources.store, tenant, sid, workspaces=layout)

    await rehydrate_session(resources.sessions, resources.store, tenant, sid)  # no layout
    assert not root.exists()
    assert await _marker(resources, tenant, sid) is not None  # still packed, still held
    assert await restore_workspace(resources.sessions, resources.store, layout, tenant, sid)
    assert _tree(root) == before
    assert not await restore_workspace(resources.sessions, resources.store, layout, tenant, sid)


async def test_gc_removes_only_workspaces_of_gone_sessions_and_leftovers_of_packed_ones(
    resources: Resources, tmp_path: Path, tenant: str
) -> None:
    layout = WorkspaceLayout(tmp_path / "base")
    old = datetime.now(UTC) - timedelta(days=3)

    def aged(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        (path / "f.txt").write_text("x")
        os.utime(path, (old.timestamp(), old.timestamp()))
        return path

    gone_old = aged(layout.session_root(tenant, uuid.uuid4()))  # no such session
    gone_new = layout.session_root(tenant, uuid.uuid4())
    gone_new.mkdir(parents=True)  # no such session, but inside the window
    live = aged(layout.session_root(tenant, await _ended_session(resources, tenant)))
    shared = aged(layout.base / tenant / "_tenant")

    packed_sid = await _ended_session(resources, tenant)
    packed_root = aged(layout.session_root(tenant, packed_sid))
    await archive_session(resources.sessions, resources.store, tenant, packed_sid,
                          workspaces=layout)  # fmt: skip
    # As if the removal after the archive had not happened: the same tree is on disk again.
    async with resources.sessions() as db:
        row = await SessionRepository(db, tenant).get(packed_sid)
        ref = resources.store.ref_for(tenant, row.workspace_sha256 or "", row.workspace_bytes or 0,
                                      "application/gzip")  # fmt: skip
    assert unpack_into(await resources.store.get(tenant, ref), packed_root)
    async with resources.sessions() as db, db.begin():
        stmt = select(SessionRow).where(SessionRow.id == packed_sid)
        (await db.scalar(stmt)).updated_at = old  # type: ignore[union-attr]

    report = await sweep_workspaces(
        resources.sessions, layout, now=datetime.now(UTC), window=timedelta(days=1),
        tenant_id=tenant,
    )  # fmt: skip
    assert sorted(report.removed) == sorted([gone_old, packed_root])
    assert await asyncio.to_thread(lambda: [p.exists() for p in (gone_new, live, shared)]) == [
        True,
        True,
        True,
    ]
