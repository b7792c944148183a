"""Walking and removing a workspace tree without recursion and without following links.

Python 3.11's os.walk and shutil.rmtree recurse once per level, so a tree 1,000 levels
deep (an MCP server or a checkout can make one) raises RecursionError in the middle of an
archive or a sweep. Here both are loops over an explicit stack. The walk stops at the
workspace path limits (storage.workspaces): what lies beyond is reported, not descended.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from durable_agents.storage.workspaces import MAX_PATH_BYTES, MAX_PATH_DEPTH

_CHUNK = 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in for a file must not hang the thread.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class TreeEntry:
    rel: str  # relative to the walked root, '/'-separated
    path: Path
    mode: int  # from lstat: the entry itself, never a link's target
    beyond: str | None  # why it lies past the path limits (then not descended into)


def beyond_limits(rel: str, depth: int) -> str | None:
    """Why a path ``depth`` components deep lies past the workspace limits, or None."""
    if depth > MAX_PATH_DEPTH:
        return f"deeper than {MAX_PATH_DEPTH} levels"
    if len(os.fsencode(rel)) > MAX_PATH_BYTES:
        return f"longer than {MAX_PATH_BYTES} bytes"
    return None


def walk(root: Path) -> Iterator[TreeEntry]:
    """Directories, regular files and symlinks below ``root``, parents first and siblings
    by name (the order of the pack). Sockets, FIFOs and devices are skipped."""
    stack: list[tuple[Path, str, int, Iterator[str]]] = [
        (root, "", 0, iter(sorted(os.listdir(root))))
    ]
    while stack:
        here, prefix, depth, names = stack[-1]
        name = next(names, None)
        if name is None:
            stack.pop()
            continue
        path, rel = here / name, prefix + name
        mode = os.lstat(path).st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            continue
        why = beyond_limits(rel, depth + 1)
        yield TreeEntry(rel, path, mode, why)
        if why is None and stat.S_ISDIR(mode):
            stack.append((path, rel + "/", depth + 1, iter(sorted(os.listdir(path)))))


def file_fingerprint(sha256: str, mode: int) -> str:
    """What a restore must reproduce of a file: its bytes and whether its owner may run it."""
    return f"file:{sha256}:{'x' if mode & stat.S_IXUSR else '-'}"


def fingerprint(entry: TreeEntry) -> str:
    """The entry's kind and content, as compared between a tree and its restored pack."""
    if stat.S_ISDIR(entry.mode):
        return "dir"
    if stat.S_ISLNK(entry.mode):
        return "link:" + os.readlink(entry.path)
    fd = os.open(entry.path, FILE_FLAGS)
    with os.fdopen(fd, "rb") as f:
        digest = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
        return file_fingerprint(digest.hexdigest(), os.fstat(f.fileno()).st_mode)


def fingerprints(root: Path) -> dict[str, str]:
    """Every entry below ``root`` with its fingerprint (entries past the limits included)."""
    return {entry.rel: fingerprint(entry) for entry in walk(root)}


def remove_tree(root: Path) -> None:
    """``rm -r root`` as a loop over directory fds: never recursion, never through a link
    (a directory swapped for a symlink meanwhile is unlinked, not followed)."""
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        root.unlink()
        return
    top = os.open(root, _DIR_FLAGS)
    stack: list[tuple[int, list[str], str]] = [(top, os.listdir(top), "")]
    try:
        while stack:
            fd, names, name_in_parent = stack[-1]
            if not names:
                os.close(fd)
                stack.pop()
                if stack:
                    os.rmdir(name_in_parent, dir_fd=stack[-1][0])
                continue
            name = names.pop()
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
                continue
            try:
                stack.append((sub, os.listdir(sub), name))
            except BaseException:
                os.close(sub)
                raise
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    os.rmdir(root)
