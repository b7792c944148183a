"""Workspace file tools: read_file and write_file (idempotent); list_dir lives in listing.

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
from typing import Annotated, Any

from pydantic import Field

from activities.tools import effects_ledger
from activities.tools.atomic_write import write_at
from activities.tools.base import Tool, ToolContext, ToolError, ToolFn, ToolOutput
from activities.tools.effects_ledger import EFFECTS_DIR
from activities.tools.fd_walk import held_dir, held_root
from activities.tools.fs_errors import classified
from activities.tools.listing import MAX_LIST_DEPTH, MAX_LIST_ENTRIES, list_dir, list_dir_tool
from activities.tools.typed import tool
from activities.tools.workspace import WorkspacePath, parse_relative

__all__ = [
    "DEFAULT_READ_CAP_BYTES",
    "EFFECTS_DIR",
    "MAX_LIST_DEPTH",
    "MAX_LIST_ENTRIES",
    "list_dir",
    "list_dir_tool",
    "make_read_file_tool",
    "read_file",
    "read_file_tool",
    "write_file",
    "write_file_tool",
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
    return ToolOutput(content=data, content_type=_content_type(path.name, data))


def make_read_file_tool(cap_bytes: int = DEFAULT_READ_CAP_BYTES) -> Tool:
    """The read_file tool, whose reads never exceed ``cap_bytes``."""

    @tool(effect="read_only")
    async def read_file(
        ctx: ToolContext,
        path: str,
        max_bytes: Annotated[int, Field(ge=1)] | None = None,
    ) -> ToolOutput:
        """Read a file from the workspace and return its bytes. Large files are fine;
        pass max_bytes to read only the beginning.

        Args:
            path: Path relative to the workspace root, e.g. 'src/app.py'.
            max_bytes: Read at most this many bytes from the start of the file.
        """
        return await asyncio.to_thread(_read_sync, ctx.workspace, path, max_bytes, cap_bytes)

    return read_file


read_file_tool = make_read_file_tool()
# The tools' functions (arguments as JSON), for callers that run them directly.
read_file: ToolFn = read_file_tool.fn


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


def _write_sync(ctx: ToolContext, raw_path: str, data: bytes) -> dict[str, Any]:
    path = _file_path(raw_path)
    digest = hashlib.sha256(data).hexdigest()
    with classified("write", path.shown), held_root(ctx.workspace) as root:
        entry = effects_ledger.load(root, ctx.idempotency_key)
        if entry is not None:
            if entry["path"] != path.rel or entry["sha256"] != digest:
                # Same key, different effect: a caller bug; applying it would break idempotency.
                raise ToolError(
                    "IdempotencyConflict",
                    f"this call's idempotency key already wrote {entry['path']!r} with "
                    "other content",
                )
            return {**entry, "already_applied": True}
        with held_dir(root, path.parent, create=True) as dir_fd:
            _refuse_non_file(dir_fd, path)
            write_at(dir_fd, path.name, data)
        entry = {"path": path.rel, "sha256": digest, "bytes": len(data)}
        effects_ledger.record(root, ctx.idempotency_key, entry)
    return {**entry, "already_applied": False}


# Effectful, asking first: it changes the workspace. A retry under the same key finds its
# entry in the effects ledger and changes nothing (see effects_ledger).
@tool(effect="effectful", needs_approval=True, name="write_file")
async def write_file_tool(ctx: ToolContext, path: str, content: str) -> dict[str, Any]:
    """Create or replace a UTF-8 text file in the workspace (parent directories are
    created). Returns JSON with path, bytes, sha256 and already_applied.

    A retry of an applied call returns the recorded result with ``already_applied: true``
    and touches nothing.

    Args:
        path: Path relative to the workspace root, e.g. 'src/app.py'.
        content: The complete new file content.
    """
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError("InvalidArguments", "argument 'content' is not encodable as UTF-8") from exc
    return await asyncio.to_thread(_write_sync, ctx, path, data)


write_file: ToolFn = write_file_tool.fn
