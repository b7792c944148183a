"""The list_dir tool: an iterative, fd-relative walk with an entry cap and a depth cap."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path, PurePosixPath
from typing import Any

from durable_agents.activities.tools.absolute_paths import absolute_refused
from durable_agents.activities.tools.base import ToolContext, ToolError, ToolFn
from durable_agents.activities.tools.fd_walk import DIR_FLAGS, held_root, open_dir
from durable_agents.activities.tools.fs_errors import classified
from durable_agents.activities.tools.typed import tool
from durable_agents.activities.tools.workspace import RESERVED_DIR, parse_directory
from durable_agents.storage.workspaces import MAX_PATH_DEPTH

MAX_LIST_ENTRIES = 2000
# The workspace's own depth limit, counted from the root: a tree deeper than the tools may
# write (made by an MCP server, say) is listed down to it, and the result says it was cut.
MAX_LIST_DEPTH = MAX_PATH_DEPTH

# Errors that make one subdirectory unlistable without sinking the whole listing: it was
# removed, made unreadable or swapped for a symlink while we walked.
_SKIPPED_SUBDIR = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.ELOOP, errno.ENOTDIR})


def _scan(fd: int) -> list[os.DirEntry[str]]:
    # scandir works on its own duplicate of the fd and leaves `fd` open for the caller.
    with os.scandir(fd) as it:
        return sorted(it, key=lambda e: e.name)


def _inner_symlink(entry: os.DirEntry[str], fd: int, parts: tuple[str, ...]) -> bool:
    """Whether a symlink's target stays inside the workspace, judged lexically from its
    text: it is listed then, but never followed (see fd_walk)."""
    try:
        target = os.readlink(entry.name, dir_fd=fd)
    except OSError:
        return False
    if PurePosixPath(target).is_absolute():
        return False
    inner = list(parts[:-1])
    for part in target.split("/"):
        if part == "..":
            if not inner:
                return False
            inner.pop()
        elif part not in ("", "."):
            inner.append(part)
    return bool(inner) and inner[0].casefold() != RESERVED_DIR


def _entry(entry: os.DirEntry[str], fd: int, parts: tuple[str, ...]) -> dict[str, Any] | None:
    path = "/".join(parts)
    if entry.is_symlink():
        return (
            {"path": path, "type": "symlink", "size": None}
            if _inner_symlink(entry, fd, parts)
            else None
        )
    if entry.is_dir(follow_symlinks=False):
        return {"path": path, "type": "dir", "size": None}
    if entry.is_file(follow_symlinks=False):
        return {"path": path, "type": "file", "size": entry.stat(follow_symlinks=False).st_size}
    return None  # sockets, FIFOs, devices: nothing a tool can read


def _open_subdir(fd: int, name: str) -> int | None:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in _SKIPPED_SUBDIR:
            return None
        raise


def walk(top: int, top_parts: tuple[str, ...], recursive: bool) -> tuple[list[Any], bool, bool]:
    """Depth-first with one open fd per level; returns (entries, truncated, depth_capped)."""
    entries: list[dict[str, Any]] = []
    truncated = depth_capped = False
    stack = [(top, top_parts, iter(_scan(top)))]
    try:
        while stack:
            fd, parts, pending = stack[-1]
            entry = next(pending, None)
            if entry is None:
                if fd != top:
                    os.close(fd)
                stack.pop()
                continue
            here = (*parts, entry.name)
            if here[0].casefold() == RESERVED_DIR:
                continue
            described = _entry(entry, fd, here)
            if described is None:
                continue
            if len(entries) == MAX_LIST_ENTRIES:
                truncated = True
                break
            entries.append(described)
            if not recursive or described["type"] != "dir":
                continue
            if len(here) >= MAX_LIST_DEPTH:
                depth_capped = True
                continue
            sub = _open_subdir(fd, entry.name)
            if sub is None:
                continue
            try:
                scanned = _scan(sub)
            except PermissionError:
                os.close(sub)
                continue
            except BaseException:
                os.close(sub)
                raise
            stack.append((sub, here, iter(scanned)))
    finally:
        for fd, _, _ in stack:
            if fd != top:
                os.close(fd)
    return entries, truncated, depth_capped


def _list_sync(workspace: Path, raw_path: str, recursive: bool) -> dict[str, Any]:
    try:
        path = parse_directory(raw_path)
    except ToolError as exc:
        asked = {"path": raw_path, **({"recursive": True} if recursive else {})}
        raise absolute_refused(exc, workspace, "list_dir", asked, directory=True) from None
    with classified("list", path.shown), held_root(workspace) as root:
        top = open_dir(root, path)
        try:
            entries, truncated, depth_capped = walk(top, path.parts, recursive)
        finally:
            os.close(top)
    entries.sort(key=lambda e: str(e["path"]).split("/"))
    payload: dict[str, Any] = {"path": path.rel, "entries": entries, "truncated": truncated}
    if depth_capped:
        payload["truncated"] = True
        payload["max_depth"] = MAX_LIST_DEPTH
    return payload


@tool(
    effect="read_only",
    name="list_dir",
    description=(
        "List a workspace directory as JSON entries {path, type: file|dir, size}, sorted; "
        "recursive=true lists every file below it at once. "
        f"At most {MAX_LIST_ENTRIES} entries; 'truncated' tells whether more exist."
    ),
)
async def list_dir_tool(
    ctx: ToolContext, path: str = ".", recursive: bool = False
) -> dict[str, Any]:
    """List a workspace directory as JSON ``{path, entries: [{path, type, size}], truncated}``.

    Entries are sorted, relative to the workspace root, exclude ``.agent/`` and are capped
    at MAX_LIST_ENTRIES entries and MAX_LIST_DEPTH levels (``truncated`` says so).
    Symlinks whose target stays inside the workspace are listed as ``type: symlink``.

    Args:
        path: Directory relative to the workspace root.
        recursive: Also list everything below subdirectories.
    """
    return await asyncio.to_thread(_list_sync, ctx.workspace, path, recursive)


list_dir: ToolFn = list_dir_tool.fn
