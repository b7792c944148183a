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
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from durable_agents.activities.tools.absolute_paths import absolute_refused
from durable_agents.activities.tools.atomic_write import write_at
from durable_agents.activities.tools.base import (
    EffectInDoubt,
    Tool,
    ToolContext,
    ToolError,
    ToolFn,
    ToolOutput,
)
from durable_agents.activities.tools.fd_walk import held_dir, held_root
from durable_agents.activities.tools.fs_errors import classified
from durable_agents.activities.tools.listing import (
    MAX_LIST_DEPTH,
    MAX_LIST_ENTRIES,
    list_dir,
    list_dir_tool,
)
from durable_agents.activities.tools.misread_files import misread
from durable_agents.activities.tools.near_names import did_you_mean
from durable_agents.activities.tools.typed import output_of, tool
from durable_agents.activities.tools.workspace import WorkspacePath, parse_relative
from durable_agents.activities.tools.workspace_probe import appeared

__all__ = [
    "DEFAULT_READ_CAP_BYTES",
    "MAX_LIST_DEPTH",
    "MAX_LIST_ENTRIES",
    "file_path",
    "list_dir",
    "list_dir_tool",
    "make_read_file_tool",
    "open_regular",
    "read_file",
    "read_file_tool",
    "read_limited",
    "reconcile_write_file",
    "utf8",
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


def file_path(raw_path: str) -> WorkspacePath:
    """The model's path of a file (not the root), checked lexically (see parse_relative)."""
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


def open_regular(dir_fd: int, path: WorkspacePath, *, suggest: bool = True) -> int:
    """An fd of the regular file `path` names in `dir_fd`, never through a symlink.
    ``suggest``: a missing file's error offers the close names (a probe that only asks
    whether it exists need not pay for a scan of the directory)."""
    try:
        fd = os.open(path.name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        near = did_you_mean(dir_fd, path.parent, path.name) if suggest else ""
        raise ToolError("FileNotFound", f"no such file: {path.shown}{near}") from None
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


def read_limited(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_sync(
    workspace: Path, raw_path: str, max_bytes: int | None, cap: int, *, suggest: bool = True
) -> ToolOutput:
    """read_file's work. ``suggest``: a path that names no file gets the call to make
    instead (a probe whose errors nobody reads need not look for one)."""
    asked = {"path": raw_path, **({"max_bytes": max_bytes} if max_bytes else {})}
    try:
        path = file_path(raw_path)
    except ToolError as exc:
        if not suggest:
            raise
        raise absolute_refused(exc, workspace, "read_file", asked, directory=False) from None
    limit = min(max_bytes or cap, cap)
    with classified("read", path.shown), held_root(workspace) as root:
        try:
            with held_dir(root, path.parent, suggest=suggest) as dir_fd:
                fd = open_regular(dir_fd, path, suggest=suggest)
        except ToolError as exc:
            if not suggest:
                raise
            raise misread(exc, root, path, asked) from None
        try:
            size = os.fstat(fd).st_size
            if size > limit and max_bytes is None:
                raise ToolError(
                    "FileTooLarge",
                    f"{path.shown} is {size} bytes, over the {cap} byte limit; pass max_bytes "
                    "to read only the beginning",
                )
            # One byte more than the limit tells us whether the file grew past it meanwhile.
            data = read_limited(fd, limit + 1)
        finally:
            os.close(fd)
    truncated = len(data) > limit
    if truncated and max_bytes is None:
        raise ToolError("FileTooLarge", f"{path.shown} grew past the {cap} byte limit")
    data = data[:limit]
    return ToolOutput(content=data, content_type=_content_type(path.name, data))


async def read_workspace_text(workspace: Path, raw_path: str, cap: int) -> str | None:
    """The first `cap` bytes of a workspace file as text (undecodable bytes replaced), read
    as read_file reads: confined to the workspace, no symlinks. None when it is not there
    or cannot be read as a file (the reason is the model's to find out with its tools)."""
    try:
        out = await asyncio.to_thread(_read_sync, workspace, raw_path, cap, cap, suggest=False)
    except ToolError:
        return None
    return out.content.decode("utf-8", errors="replace")


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


def _written(path: WorkspacePath, data: bytes, already_applied: bool) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    entry = {"path": path.rel, "sha256": digest, "bytes": len(data)}
    return {**entry, "already_applied": already_applied}


# Said of a write or edit that found the file already as it would leave it.
UNCHANGED_NOTE = "the file already held exactly this, so nothing was written"


def unchanged_output(tool_name: str, result: dict[str, Any]) -> ToolOutput:
    """``result`` with ``unchanged`` and the note, as a change that did not happen."""
    done = output_of(tool_name, {**result, "unchanged": True, "note": UNCHANGED_NOTE})
    return replace(done, changed=False)


def _write_sync(ctx: ToolContext, raw_path: str, data: bytes) -> dict[str, Any]:
    path = file_path(raw_path)
    # Let through unasked because nothing was there: whatever appeared since is kept.
    new_only = "path" in ctx.must_be_new
    with (
        classified("write", path.shown),
        held_root(ctx.workspace) as root,
        held_dir(root, path.parent, create=True) as dir_fd,
    ):
        _refuse_non_file(dir_fd, path)
        if not new_only and _current_bytes(root, path, len(data)) == data:
            return {**_written(path, data, already_applied=False), "unchanged": True}
        try:
            write_at(dir_fd, path.name, data, replace=not new_only)
        except FileExistsError:
            raise appeared(path.shown) from None
    return _written(path, data, already_applied=False)


def _current_bytes(root: int, path: WorkspacePath, limit: int) -> bytes | None:
    """The file's bytes, up to `limit` + 1 (enough to tell a longer file), or None if it
    (or a directory on its way) does not exist."""
    try:
        with held_dir(root, path.parent, suggest=False) as dir_fd:
            fd = open_regular(dir_fd, path, suggest=False)
    except ToolError as err:
        if err.error_type in ("FileNotFound", "NotADirectory"):
            return None
        raise
    try:
        return read_limited(fd, limit + 1)
    finally:
        os.close(fd)


def _reconcile_sync(ctx: ToolContext, raw_path: str, data: bytes) -> dict[str, Any] | None:
    path = file_path(raw_path)
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


def utf8(text: str, argument: str = "content") -> bytes:
    """`text` as UTF-8; a lone surrogate is the model's mistake, named by its argument."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            "InvalidArguments", f"argument {argument!r} is not encodable as UTF-8"
        ) from exc


async def reconcile_write_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput | None:
    """Settle a write_file call an interrupted attempt may have applied, from the workspace.

    The file holds exactly this call's bytes: the write landed (``already_applied: true``,
    nothing rewritten). No file: safe to write. Other bytes: in doubt (EffectInDoubt), as
    rewriting could clobber an edit made since.
    """
    path, content = args.get("path"), args.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        raise ToolError("InvalidArguments", "write_file takes a string path and content")
    done = await asyncio.to_thread(_reconcile_sync, ctx, path, utf8(content))
    return None if done is None else output_of("write_file", done)


# Effectful, asking first: it changes the workspace (an agent or an operator may ask only
# before it replaces a file, `exists:path`). run_tool ledgers each call; an interrupted one
# is settled by reconcile_write_file from the workspace, never rewritten.
@tool(effect="effectful", needs_approval=True, reconcile=reconcile_write_file, name="write_file")
async def write_file_tool(ctx: ToolContext, path: str, content: str) -> dict[str, Any] | ToolOutput:
    """Create a UTF-8 text file in the workspace (parent directories are created), or
    replace a whole one. To change part of a file that exists, use edit_file instead.
    Returns JSON with path, bytes, sha256 and already_applied.

    A call interrupted after its write is not written again: its result then says
    ``already_applied: true``.

    Args:
        path: Path relative to the workspace root, e.g. 'src/app.py'.
        content: The complete new file content.
    """
    done = await asyncio.to_thread(_write_sync, ctx, path, utf8(content))
    return unchanged_output("write_file", done) if done.pop("unchanged", False) else done


write_file: ToolFn = write_file_tool.fn
