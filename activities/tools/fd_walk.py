"""Open workspace paths one component at a time, relative to a held directory fd.

Checking a resolved path and then opening it by name leaves a window in which a directory
can be swapped for a symlink (O_NOFOLLOW guards only the last component). Here every
component is opened with ``dir_fd=`` and O_NOFOLLOW from the directory fd before it, so
what is opened is always below the root, whatever is renamed meanwhile. Symlinks are never
traversed, even ones pointing inside the workspace: the simple rule is the safe one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from durable_agents.activities.tools.base import ToolError
from durable_agents.activities.tools.fs_errors import classified
from durable_agents.activities.tools.near_names import did_you_mean
from durable_agents.activities.tools.workspace import WorkspacePath
from durable_agents.storage.workspaces import make_private_dirs

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_root(workspace: Path) -> int:
    """Open (creating it 0700 on first use) the workspace root; the caller closes the fd.

    The root itself is configuration, not model input, so it may be reached via symlinks.
    """
    with classified("open", "the workspace root"):
        try:
            return os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            make_private_dirs(workspace)
            return os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _refuse_symlink(path: WorkspacePath, upto: int) -> ToolError:
    inner = WorkspacePath(path.parts[:upto]).shown
    return ToolError(
        "SymlinkRefused",
        f"{inner} (in {path.shown}) is a symbolic link; workspace tools do not follow "
        "symlinks, use the real path",
    )


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _step(fd: int, path: WorkspacePath, index: int, *, create: bool, suggest: bool = True) -> int:
    """Open component ``index`` below ``fd``. Other OSErrors are left to the caller's
    ``classified`` block, which knows what was being done. ``suggest``: a missing
    directory's error offers the close names (a probe that only asks whether it exists
    need not pay for a scan)."""
    name = path.parts[index]
    shown = WorkspacePath(path.parts[: index + 1]).shown
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            near = did_you_mean(fd, WorkspacePath(path.parts[:index]), name) if suggest else ""
            raise ToolError("FileNotFound", f"no such directory: {shown}{near}") from None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        if _is_symlink(fd, name):
            raise _refuse_symlink(path, index + 1) from None
        raise ToolError("NotADirectory", f"{shown} is a file, not a directory") from None
    # FileExistsError: made by a concurrent call; opened (and checked) below like any other.
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, dir_fd=fd)
    return _step(fd, path, index, create=False)


def open_dir(
    root_fd: int, path: WorkspacePath, *, create: bool = False, suggest: bool = True
) -> int:
    """Return a new fd for the directory ``path`` below ``root_fd``; the caller closes it.

    ``create`` makes missing directories on the way. A symlink anywhere on the way raises
    ToolError("SymlinkRefused"); a file on the way ToolError("NotADirectory"); a missing
    one ToolError("FileNotFound"), offering close names unless ``suggest`` is False.
    """
    fd = os.dup(root_fd)
    try:
        for index in range(len(path.parts)):
            nxt = _step(fd, path, index, create=create, suggest=suggest)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def held_dir(
    root_fd: int, path: WorkspacePath, *, create: bool = False, suggest: bool = True
) -> Iterator[int]:
    """open_dir as a context manager."""
    fd = open_dir(root_fd, path, create=create, suggest=suggest)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def held_root(workspace: Path) -> Iterator[int]:
    """open_root as a context manager."""
    fd = open_root(workspace)
    try:
        yield fd
    finally:
        os.close(fd)
