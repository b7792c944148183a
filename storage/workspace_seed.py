"""A workspace seed: files a new session's root starts with (AGENT_WORKSPACE_SEED).

`agentctl dev up` seeds with the demo's files, so a first task has something to survey. The
copy is made once, when the root does not exist yet, into a private scratch directory next
to it that is then renamed into place: a root is either absent or holds the whole seed, and
of two concurrent first calls one copy wins. Only regular files and directories are copied,
by content (modes are the workspace's own, times are now); symlinks and special files are
left out, never followed. A seed beyond the bounds below is refused when the worker starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from durable_agents.storage.workspaces import (
    MAX_PATH_DEPTH,
    ROOT_MODE,
    SessionLike,
    WorkspaceLayout,
    make_private_dirs,
)

MAX_SEED_FILES = 1_000
MAX_SEED_BYTES = 64 * 1024 * 1024
FILE_MODE = 0o600
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class SeedError(ValueError):
    """The seed cannot be used: missing, not a directory, unreadable or too large."""


def _entries(seed: Path, rel: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(relative parts, is_dir) of the seed's files and directories, symlinks left out."""
    if len(rel) >= MAX_PATH_DEPTH:
        return
    with os.scandir(seed.joinpath(*rel)) as listing:
        for entry in sorted(listing, key=lambda e: e.name):
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                yield (*rel, entry.name), True
                yield from _entries(seed, (*rel, entry.name))
            elif entry.is_file(follow_symlinks=False):
                yield (*rel, entry.name), False


def check_seed(seed: Path) -> Path:
    """The seed made absolute, after reading every file it would copy; SeedError otherwise."""
    where = f"AGENT_WORKSPACE_SEED={seed}"
    try:
        seed = seed.resolve(strict=True)  # configuration: the seed itself may be a symlink
        if not seed.is_dir():
            raise SeedError(f"{where} is not a directory")
        files = total = 0
        for parts, is_dir in _entries(seed):
            if is_dir:
                continue
            files += 1
            fd = os.open(seed.joinpath(*parts), _READ)
            try:
                total += os.fstat(fd).st_size
            finally:
                os.close(fd)
            if files > MAX_SEED_FILES or total > MAX_SEED_BYTES:
                raise SeedError(
                    f"{where} holds more than {MAX_SEED_FILES} files or "
                    f"{MAX_SEED_BYTES // 2**20} MiB: every new session gets a copy"
                )
    except OSError as exc:
        raise SeedError(f"{where} cannot be read: {exc.strerror or exc}") from None
    return seed


def seed_new_root(seed: Path, root: Path) -> bool:
    """Copy the seed's files into ``root`` if ``root`` does not exist yet; True if this
    call made it. Within the same bounds as check_seed (the rest is left out)."""
    if os.path.lexists(root):
        return False
    make_private_dirs(root.parent)
    scratch = Path(tempfile.mkdtemp(prefix=f".seed-{root.name}-", dir=root.parent))
    try:
        os.chmod(scratch, ROOT_MODE)
        _copy(seed, scratch)
        try:
            # Fails when another first call's copy is already there (a non-empty root).
            os.rename(scratch, root)
        except OSError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(scratch)


def _copy(seed: Path, into: Path) -> None:
    files = total = 0
    for parts, is_dir in _entries(seed):
        target = into.joinpath(*parts)
        if is_dir:
            os.mkdir(target, ROOT_MODE)
            continue
        try:
            src = os.open(seed.joinpath(*parts), _READ)
        except OSError:
            continue  # changed since the worker started: left out
        try:
            info = os.fstat(src)
            if not stat.S_ISREG(info.st_mode) or files >= MAX_SEED_FILES:
                continue
            if total + info.st_size > MAX_SEED_BYTES:
                continue
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with (
                open(src, "rb", closefd=False) as r,
                open(os.open(target, flags, FILE_MODE), "wb") as w,
            ):
                shutil.copyfileobj(r, w)
            files, total = files + 1, total + info.st_size
        finally:
            os.close(src)


async def seed_if_new(
    workspace: Path | WorkspaceLayout, tenant_id: str, session: SessionLike, root: Path
) -> None:
    """Before a tool or check first opens ``root``: seed it if its layout seeds it."""
    seed = _seed_of(workspace, tenant_id, session)
    if seed is not None:
        await asyncio.to_thread(seed_new_root, seed, root)


def _seed_of(workspace: Path | WorkspaceLayout, tenant: str, session: SessionLike) -> Path | None:
    # A device's one fixed directory is its user's own: never seeded.
    if isinstance(workspace, WorkspaceLayout):
        return workspace.seed_for(tenant, session)
    return None
