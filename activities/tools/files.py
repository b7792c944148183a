"""Workspace file tools: read_file and write_file (effectful, reconciled from the
workspace); list_dir lives in listing.

Every path is opened component by component below the workspace root's fd (see fd_walk),
and every filesystem error is classified as the model's to hear or worth a retry (see
fs_errors). Blocking filesystem work runs in a thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import hashlib
import mimetypes
import os
import stat
from pathlib import Path
from typing import Any

from activities.tools.args import (
    check_args,
    json_output,
    optional_positive_int,
    require_str,
)
from activities.tools.atomic_write import write_at
from activities.tools.base import EffectInDoubt, ToolContext, ToolError, ToolFn, ToolOutput
from activities.tools.fd_walk import held_dir, held_root
from activities.tools.fs_errors import classified
from activities.tools.listing import MAX_LIST_DEPTH, MAX_LIST_ENTRIES, list_dir
from activities.tools.workspace import WorkspacePath, parse_relative

__all__ = [
    "DEFAULT_READ_CAP_BYTES",
    "MAX_LIST_DEPTH",
    "MAX_LIST_ENTRIES",
    "list_dir",
    "make_read_file",
    "read_file",
    "reconcile_write_file",
    "write_file",
]

# Generous: results go to object storage by reference, not into the conversation.
DEFAULT_READ_CAP_BYTES = 64 * 1024 * 1024

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_BINARY = "application/octet-stream"
_SNIFF_BYTES = 8192
_ENCODING_TYPES = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
}
# O_NONBLOCK: opening a FIFO would otherwise hang the worker thread forever.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _file_path(raw_path: str) -> WorkspacePath:
    path = parse_relative(raw_path)
    if not path.parts:
        raise ToolError("NotAFile", "'.' is the workspace root, a directory")
    return path


# --- read_file -----------------------------------------------------------------------


def _looks_like_utf8(data: bytes) -> bool:
    # Incremental decoder so a multi-byte character cut at the sniff boundary is fine.
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data[:_SNIFF_BYTES], final=False)
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data[:_SNIFF_BYTES]


def _content_type(name: str, data: bytes) -> str:
    guessed, encoding = mimetypes.guess_type(name)
    if encoding is not None:
        # "x.tar.gz" guesses as tar, but the bytes on disk are gzip.
        return _ENCODING_TYPES.get(encoding, _BINARY)
    text_like = guessed is None or guessed.startswith("text/") or guessed == _JSON
    if text_like and _looks_like_utf8(data):
        return _TEXT if guessed is None else f"{guessed}; charset=utf-8"
    return guessed or _BINARY


def _open_regular(dir_fd: int, path: WorkspacePath) -> int:
    try:
        fd = os.open(path.name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ToolError("FileNotFound", f"no such file: {path.shown}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(
                "SymlinkRefused",
                f"{path.shown} is a symbolic link; workspace tools do not follow symlinks",
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError("NotAFile", f"{path.shown} is not a regular file (directory or special)")
    return fd


def _read_limited(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_sync(workspace: Path, raw_path: str, max_bytes: int | None, cap: int) -> ToolOutput:
    path = _file_path(raw_path)
    limit = min(max_bytes or cap, cap)
    with classified("read", path.shown), held_root(workspace) as root:
        with held_dir(root, path.parent) as dir_fd:
            fd = _open_regular(dir_fd, path)
        try:
            size = os.fstat(fd).st_size
            if size > limit and max_bytes is None:
                raise ToolError(
                    "FileTooLarge",
                    f"{path.shown} is {size} bytes, over the {cap} byte limit; pass max_bytes "
                    "to read only the beginning",
                )
            # One byte more than the limit tells us whether the file grew past it meanwhile.
            data = _read_limited(fd, limit + 1)
        finally:
            os.close(fd)
    truncated = len(data) > limit
    if truncated and max_bytes is None:
        raise ToolError("FileTooLarge", f"{path.shown} grew past the {cap} byte limit")
    data = data[:limit]
    summary = f"read {len(data)} bytes from {path.shown}"
    if truncated:
        summary += f" (truncated at max_bytes={limit}; the file is larger)"
    return ToolOutput(content=data, content_type=_content_type(path.name, data), summary=summary)


def make_read_file(cap_bytes: int = DEFAULT_READ_CAP_BYTES) -> ToolFn:
    """Build a read_file tool whose reads never exceed ``cap_bytes``."""

    async def read_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        """Return a workspace file's bytes; ``max_bytes`` reads only the beginning."""
        check_args(args)
        raw_path = require_str(args, "path")
        max_bytes = optional_positive_int(args, "max_bytes")
        return await asyncio.to_thread(_read_sync, ctx.workspace, raw_path, max_bytes, cap_bytes)

    return read_file


read_file = make_read_file()


# --- write_file ----------------------------------------------------------------------


def _refuse_non_file(dir_fd: int, path: WorkspacePath) -> None:
    try:
        st = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise ToolError("NotAFile", f"{path.shown} is a directory")
    if stat.S_ISLNK(st.st_mode):
        # The rename would replace the link itself (never its target); refusing is clearer.
        raise ToolError(
            "SymlinkRefused",
            f"{path.shown} is a symbolic link; workspace tools do not follow symlinks",
        )


def _written(path: WorkspacePath, data: bytes, already_applied: bool) -> ToolOutput:
    entry = {"path": path.rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    summary = (
        f"already wrote {len(data)} bytes to {path.shown}; not redone"
        if already_applied
        else f"wrote {len(data)} bytes to {path.shown}"
    )
    return json_output({**entry, "already_applied": already_applied}, summary)


def _write_sync(ctx: ToolContext, raw_path: str, data: bytes) -> ToolOutput:
    path = _file_path(raw_path)
    with (
        classified("write", path.shown),
        held_root(ctx.workspace) as root,
        held_dir(root, path.parent, create=True) as dir_fd,
    ):
        _refuse_non_file(dir_fd, path)
        write_at(dir_fd, path.name, data)
    return _written(path, data, already_applied=False)


def _current_bytes(root: int, path: WorkspacePath, limit: int) -> bytes | None:
    """The file's bytes, up to `limit` + 1 (enough to tell a longer file), or None if it
    (or a directory on its way) does not exist."""
    try:
        with held_dir(root, path.parent) as dir_fd:
            fd = _open_regular(dir_fd, path)
    except ToolError as err:
        if err.error_type in ("FileNotFound", "NotADirectory"):
            return None
        raise
    try:
        return _read_limited(fd, limit + 1)
    finally:
        os.close(fd)


def _reconcile_sync(ctx: ToolContext, raw_path: str, data: bytes) -> ToolOutput | None:
    path = _file_path(raw_path)
    with classified("read", path.shown), held_root(ctx.workspace) as root:
        current = _current_bytes(root, path, len(data))
    if current == data:
        return _written(path, data, already_applied=True)
    if current is None:
        return None  # nothing there: the write did not land, or was undone; nothing to clobber
    # Either the write never landed (the file still holds what was there before) or it
    # landed and the file was edited since: writing now could destroy that edit.
    raise EffectInDoubt(
        f"{path.shown} now holds other content than this call writes; it may have been edited since"
    )


def _content_bytes(args: dict[str, Any]) -> tuple[str, bytes]:
    check_args(args)
    raw_path = require_str(args, "path")
    content = require_str(args, "content")
    try:
        return raw_path, content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError("InvalidArguments", "argument 'content' is not encodable as UTF-8") from exc


async def write_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    """Atomically write text to a workspace file.

    Returns JSON ``{path, bytes, sha256, already_applied}``. Effectful: run_tool ledgers
    the call, and an interrupted call is settled by `reconcile_write_file`, not rewritten.
    """
    raw_path, data = _content_bytes(args)
    return await asyncio.to_thread(_write_sync, ctx, raw_path, data)


async def reconcile_write_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput | None:
    """Settle a write_file call an interrupted attempt may have applied, from the workspace.

    The file holds exactly this call's bytes: the write landed (``already_applied: true``,
    nothing rewritten). No file: safe to write. Other bytes: in doubt (EffectInDoubt), as
    rewriting could clobber an edit made since.
    """
    raw_path, data = _content_bytes(args)
    return await asyncio.to_thread(_reconcile_sync, ctx, raw_path, data)
