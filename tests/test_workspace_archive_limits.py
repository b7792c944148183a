"""What a workspace pack cannot hold is listed and kept on disk, never lost: trees deeper
than the workspace limit, links no restore may recreate; a pack is proven to restore
before its directory goes; and one such session never stops `archive idle` for the rest."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, update

from durable_agents.storage.archive import archive_session, rehydrate_session
from durable_agents.storage.models import SessionRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.workspace_lifecycle import sweep_workspaces
from durable_agents.storage.workspace_pack import (
    WorkspaceNotPackable,
    left_out_of,
    pack_dir,
    pack_proven,
    restore_check,
    unpack_into,
)
from durable_agents.storage.workspace_tree import fingerprints, remove_tree
from durable_agents.storage.workspaces import MAX_PATH_DEPTH, WorkspaceLayout
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from tests.support.helpers import agentctl

DEPTH = 1_100


@contextmanager
def deep_tree(top: Path, depth: int = DEPTH) -> Iterator[Path]:
    """top/a/a/.../a, made through dir fds as an MCP server could; removed afterwards
    without recursion (pytest's own cleanup would hit the recursion limit on it)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("a", dir_fd=fd)
        nxt = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    with os.fdopen(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as f:
        f.write("at the bottom")
    os.close(fd)
    try:
        yield top
    finally:
        remove_tree(top)


def depth_below(top: Path) -> int:
    """How many 'a' levels are below ``top`` (walked by fd: the path is too long to name)."""
    fd, depth = os.open(top, os.O_RDONLY | os.O_DIRECTORY), 0
    try:
        while "a" in os.listdir(fd):
            nxt = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, depth = nxt, depth + 1
    finally:
        os.close(fd)
    return depth


def links_no_restore_recreates(root: Path) -> None:
    (root / "a.txt").write_text("alpha")
    (root / "inner").symlink_to("a.txt")
    (root / "abs").symlink_to("/etc/hostname")
    (root / "up").symlink_to("../../outside")
    (root / "d").mkdir()
    (root / "d/up").symlink_to("..")  # the root itself: restorable
    # Lexically d/up/.. is d, inside; resolved, d/up is the root and .. leaves it. Only
    # the restore's own check (realpath) catches it, so the packer has to ask it.
    (root / "e").symlink_to("d/up/..")


async def _ended_session(res: Resources, tenant: str) -> uuid.UUID:
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        repo = SessionRepository(db, tenant)
        await repo.create(sid, title="ws", model_config={})
        await repo.set_status(sid, "completed")
    return sid


async def _age(res: Resources, sids: list[uuid.UUID]) -> None:
    """Make the sessions idle for days, the first the longest (archive idle's order)."""
    async with res.sessions() as db, db.begin():
        for n, sid in enumerate(sids):
            await db.execute(
                update(SessionRow)
                .where(SessionRow.id == sid)
                .values(updated_at=func.now() - timedelta(days=30 - n))
            )


async def _status(res: Resources, tenant: str, sid: uuid.UUID) -> str:
    async with res.sessions() as db:
        return (await SessionRepository(db, tenant).get(sid)).status


def test_what_the_file_tools_may_write_packs_completely_and_restores(tmp_path: Path) -> None:
    root, back = tmp_path / "ws", tmp_path / "back"
    deepest = root.joinpath(*["d"] * (MAX_PATH_DEPTH - 1))
    deepest.mkdir(parents=True)
    (deepest / "f.txt").write_text("deepest a tool may write")
    pack = pack_proven(root, tmp_path / "p.tar.gz", tmp_path)
    assert pack.complete
    assert unpack_into((tmp_path / "p.tar.gz").read_bytes(), back)
    assert fingerprints(back) == fingerprints(root)


def test_a_pack_that_restores_to_another_tree_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    out = tmp_path / "p.tar.gz"
    pack = pack_dir(root, out)
    assert restore_check(out.read_bytes(), pack, tmp_path) == {}
    # As if a byte had changed between the tree and what its pack restores to.
    (root / "a.txt").write_text("alphb")
    wrong = dataclasses.replace(pack, listing=fingerprints(root))
    with pytest.raises(WorkspaceNotPackable, match="1 of 1 entries differ"):
        restore_check(out.read_bytes(), wrong, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.tar.gz", "ws"]  # no scratch left


async def test_a_tree_1100_levels_deep_archives_and_its_directory_is_kept(
    resources: Resources, tmp_path: Path, tenant: str
) -> None:
    layout = WorkspaceLayout(tmp_path / "base")
    sid = await _ended_session(resources, tenant)
    root = layout.session_root(tenant, sid)
    (root / "deep").mkdir(parents=True)
    (root / "notes.txt").write_text("notes")
    with deep_tree(root / "deep"):
        result = await archive_session(
            resources.sessions, resources.store, tenant, sid, workspaces=layout
        )
        assert result.created and result.workspace_sha256 is not None
        assert result.workspace_kept and result.workspace_left_out_count == 1
        [left] = result.workspace_left_out
        assert left.path.startswith("deep/a/a/") and "deeper than 64 levels" in left.why
        assert await asyncio.to_thread(depth_below, root / "deep") == DEPTH  # all of it

        # The pack holds everything down to the limit and says what it left out.
        async with resources.sessions() as db:
            row = await SessionRepository(db, tenant).get(sid)
        ref = resources.store.ref_for(
            tenant, row.workspace_sha256 or "", row.workspace_bytes or 0, "application/gzip"
        )
        data = await resources.store.get(tenant, ref)
        assert left_out_of(data)[0] == 1
        back = tmp_path / "restored"
        assert await asyncio.to_thread(unpack_into, data, back)
        assert (back / "notes.txt").read_text() == "notes"
        assert await asyncio.to_thread(depth_below, back / "deep") == MAX_PATH_DEPTH - 1
        await asyncio.to_thread(remove_tree, back)

        # A GC sweep never takes a directory its pack does not fully stand for.
        async with resources.sessions() as db, db.begin():
            await db.execute(
                update(SessionRow)
                .where(SessionRow.id == sid)
                .values(updated_at=func.now() - timedelta(days=3))
            )
        swept = await sweep_workspaces(
            resources.sessions, layout, now=datetime.now(UTC), window=timedelta(days=1),
            tenant_id=tenant,
        )  # fmt: skip
        assert swept.removed == [] and root.exists()
        assert await asyncio.to_thread(depth_below, root / "deep") == DEPTH


async def test_links_no_restore_may_recreate_are_listed_and_their_directory_kept(
    resources: Resources, tmp_path: Path, tenant: str
) -> None:
    layout = WorkspaceLayout(tmp_path / "base")
    sid = await _ended_session(resources, tenant)
    root = layout.session_root(tenant, sid)
    root.mkdir(parents=True)
    links_no_restore_recreates(root)
    before = fingerprints(root)

    result = await archive_session(
        resources.sessions, resources.store, tenant, sid, workspaces=layout
    )

    assert root.exists(), "the workspace went, though its pack cannot restore its links"
    assert fingerprints(root) == before
    assert result.workspace_kept
    assert {x.path: x.why for x in result.workspace_left_out} == {
        "abs": "a symbolic link to an absolute path",
        "up": "a link that leads outside the workspace",
        "e": "a link that leads outside the workspace",
    }
    # The pack restores (no AbsoluteLinkError) to everything else, exactly.
    async with resources.sessions() as db:
        row = await SessionRepository(db, tenant).get(sid)
    ref = resources.store.ref_for(
        tenant, row.workspace_sha256 or "", row.workspace_bytes or 0, "application/gzip"
    )
    back = tmp_path / "restored"
    assert unpack_into(await resources.store.get(tenant, ref), back)
    assert fingerprints(back) == {k: v for k, v in before.items() if k not in {"abs", "up", "e"}}
    # Rehydrating keeps the directory that never left, links and all.
    await rehydrate_session(resources.sessions, resources.store, tenant, sid, workspaces=layout)
    assert fingerprints(root) == before


async def test_archive_idle_goes_on_past_a_bad_session_and_reports_it(
    resources: Resources,
    tmp_path: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = tmp_path / "base"
    monkeypatch.setenv("AGENT_WORKSPACE", str(base))
    get_settings.cache_clear()
    layout = WorkspaceLayout(base)
    good1, deep, bad, links, good2 = [await _ended_session(resources, tenant) for _ in range(5)]
    roots = {sid: layout.session_root(tenant, sid) for sid in (good1, deep, bad, links, good2)}
    for sid in (good1, deep, links, good2):
        roots[sid].mkdir(parents=True)
        (roots[sid] / "f.txt").write_text(str(sid))
    links_no_restore_recreates(roots[links])
    # A root that is a symlink (its directory replaced by a process in it): packing would
    # follow it elsewhere, so this session cannot be archived until someone looks.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("not the session's")
    roots[bad].symlink_to(elsewhere)
    await _age(resources, [good1, deep, bad, links, good2])

    with deep_tree(roots[deep]):
        code, out, err = await agentctl(capsys, "archive", "idle", "--for", "1d")
        assert await asyncio.to_thread(depth_below, roots[deep]) == DEPTH

    for sid in (good1, deep, links, good2):
        assert await _status(resources, tenant, sid) == "archived", "the run stopped early"
    assert await _status(resources, tenant, bad) == "completed"
    assert code == 1, (out, err)
    assert all(f"archived {sid}" in out for sid in (good1, deep, links, good2))
    assert f"failed {bad}: WorkspaceNotPackable" in err
    assert "archived 4 sessions" in out and "1 failed" in out
    assert f"workspace of {deep} kept on disk" in err
    assert f"workspace of {links} kept on disk" in err and "'abs': a symbolic link" in err
    assert not roots[good1].exists() and not roots[good2].exists()
    assert roots[links].exists() and roots[bad].is_symlink()
    assert (elsewhere / "precious.txt").read_text() == "not the session's"
