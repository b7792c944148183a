"""Workspace file tools: read_file, write_file (idempotent) and list_dir.

Blocking filesystem work runs in a thread so the activity worker's event loop stays free.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import hashlib
import json
import mimetypes
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from activities.tools.base import ToolContext, ToolError, ToolFn, ToolOutput
from activities.tools.workspace import RESERVED_DIR, resolve_in_workspace, workspace_relative

# Generous: results go to object storage by reference, not into the conversation.
DEFAULT_READ_CAP_BYTES = 64 * 1024 * 1024
MAX_LIST_ENTRIES = 2000
EFFECTS_DIR = f"{RESERVED_DIR}/effects"

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_BINARY = "application/octet-stream"
_SNIFF_BYTES = 8192
_ENCODING_TYPES = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
}


# --- argument validation -------------------------------------------------------------


def _check_args(args: dict[str, Any]) -> None:
    if "_raw" in args:
        raise ToolError(
            "InvalidArguments", "the tool arguments were not valid JSON; send a JSON object"
        )


def _require_str(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if value is None:
        raise ToolError("InvalidArguments", f"missing required argument {name!r} (string)")
    if not isinstance(value, str):
        raise ToolError(
            "InvalidArguments", f"argument {name!r} must be a string, got {type(value).__name__}"
        )
    return value


def _optional_str(args: dict[str, Any], name: str, default: str) -> str:
    return default if args.get(name) is None else _require_str(args, name)


def _optional_bool(args: dict[str, Any], name: str, default: bool) -> bool:
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(
            "InvalidArguments", f"argument {name!r} must be a boolean, got {type(value).__name__}"
        )
    return value


def _optional_positive_int(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    # bool is an int subclass; "max_bytes": true is a model mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ToolError("InvalidArguments", f"argument {name!r} must be a positive integer")
    return value


def _json_output(payload: dict[str, Any], summary: str) -> ToolOutput:
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return ToolOutput(content=body, content_type=_JSON, summary=summary)


# --- read_file -----------------------------------------------------------------------


def _looks_like_utf8(data: bytes) -> bool:
    # Incremental decoder so a multi-byte character cut at the sniff boundary is fine.
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data[:_SNIFF_BYTES], final=False)
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data[:_SNIFF_BYTES]


def _content_type(path: Path, data: bytes) -> str:
    guessed, encoding = mimetypes.guess_type(path.name)
    if encoding is not None:
        # "x.tar.gz" guesses as tar, but the bytes on disk are gzip.
        return _ENCODING_TYPES.get(encoding, _BINARY)
    text_like = guessed is None or guessed.startswith("text/") or guessed == _JSON
    if text_like and _looks_like_utf8(data):
        return _TEXT if guessed is None else f"{guessed}; charset=utf-8"
    return guessed or _BINARY


def _open_regular(path: Path, shown: str) -> int:
    # O_NOFOLLOW: the path was resolved symlink-free; refuse one swapped in since then.
    # O_NONBLOCK: opening a FIFO would otherwise hang the worker thread forever.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise ToolError("FileNotFound", f"no such file: {shown}") from exc
    except NotADirectoryError as exc:
        raise ToolError("FileNotFound", f"no such file: {shown} (a parent is a file)") from exc
    except PermissionError as exc:
        raise ToolError("PermissionDenied", f"permission denied reading {shown}") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError("PathOutsideWorkspace", f"{shown} became a symlink") from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError("NotAFile", f"{shown} is not a regular file (directory or special file)")
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
    path = resolve_in_workspace(workspace, raw_path)
    shown = repr(workspace_relative(workspace, path))
    limit = min(max_bytes or cap, cap)
    fd = _open_regular(path, shown)
    try:
        size = os.fstat(fd).st_size
        if size > limit and max_bytes is None:
            raise ToolError(
                "FileTooLarge",
                f"{shown} is {size} bytes, over the {cap} byte limit; pass max_bytes to read "
                "only the beginning",
            )
        # One byte more than the limit tells us whether the file grew past it meanwhile.
        data = _read_limited(fd, limit + 1)
    finally:
        os.close(fd)
    truncated = len(data) > limit
    if truncated and max_bytes is None:
        raise ToolError("FileTooLarge", f"{shown} grew past the {cap} byte limit while reading")
    data = data[:limit]
    summary = f"read {len(data)} bytes from {shown}"
    if truncated:
        summary += f" (truncated at max_bytes={limit}; the file is larger)"
    return ToolOutput(content=data, content_type=_content_type(path, data), summary=summary)


def make_read_file(cap_bytes: int = DEFAULT_READ_CAP_BYTES) -> ToolFn:
    """Build a read_file tool whose reads never exceed ``cap_bytes``."""

    async def read_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        """Return a workspace file's bytes; ``max_bytes`` reads only the beginning."""
        _check_args(args)
        raw_path = _require_str(args, "path")
        max_bytes = _optional_positive_int(args, "max_bytes")
        return await asyncio.to_thread(_read_sync, ctx.workspace, raw_path, max_bytes, cap_bytes)

    return read_file


read_file = make_read_file()


# --- write_file ----------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    # Makes the rename durable; unsupported on some platforms/filesystems, hence best effort.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _atomic_write(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` so readers see the old or the new file, never a mix."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o644
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(target.parent)


def _ledger_path(workspace: Path, idempotency_key: str) -> Path:
    # Hashed so arbitrary key characters can never form a path of their own.
    digest = hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest()
    return resolve_in_workspace(workspace, f"{EFFECTS_DIR}/{digest}.json", allow_reserved=True)


def _load_ledger(ledger: Path) -> dict[str, Any] | None:
    try:
        entry = json.loads(ledger.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        # Rewriting could clobber edits made since the first write, so do not guess.
        raise ToolError(
            "EffectsLedgerCorrupt", "the effects ledger entry for this call is unreadable"
        ) from exc
    if not isinstance(entry, dict) or not {"path", "sha256", "bytes"} <= entry.keys():
        raise ToolError("EffectsLedgerCorrupt", "the effects ledger entry for this call is invalid")
    return entry


def _write_sync(ctx: ToolContext, raw_path: str, data: bytes) -> ToolOutput:
    target = resolve_in_workspace(ctx.workspace, raw_path)
    rel = workspace_relative(ctx.workspace, target)
    digest = hashlib.sha256(data).hexdigest()
    ledger = _ledger_path(ctx.workspace, ctx.idempotency_key)

    entry = _load_ledger(ledger)
    if entry is not None:
        if entry["path"] != rel or entry["sha256"] != digest:
            # Same key, different effect: a caller bug; applying it would break idempotency.
            raise ToolError(
                "IdempotencyConflict",
                f"this call's idempotency key already wrote {entry['path']!r} with other content",
            )
        result = {**entry, "already_applied": True}
        return _json_output(result, f"already wrote {entry['bytes']} bytes to {rel!r}; not redone")

    if target.is_dir():
        raise ToolError("NotAFile", f"{rel!r} is a directory")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolError("NotADirectory", f"a parent of {rel!r} is a file") from exc
    try:
        _atomic_write(target, data)
    except PermissionError as exc:
        raise ToolError("PermissionDenied", f"permission denied writing {rel!r}") from exc

    # After the file: a crash in between only means the retry rewrites identical bytes.
    entry = {"path": rel, "sha256": digest, "bytes": len(data)}
    ledger.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(ledger, json.dumps(entry, sort_keys=True).encode("utf-8"))
    return _json_output({**entry, "already_applied": False}, f"wrote {len(data)} bytes to {rel!r}")


async def write_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    """Atomically write text to a workspace file, at most once per idempotency key.

    Returns JSON ``{path, bytes, sha256, already_applied}``; a retry of an applied call
    returns the recorded result with ``already_applied: true`` and touches nothing.
    """
    _check_args(args)
    raw_path = _require_str(args, "path")
    content = _require_str(args, "content")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError("InvalidArguments", "argument 'content' is not encodable as UTF-8") from exc
    return await asyncio.to_thread(_write_sync, ctx, raw_path, data)


# --- list_dir ------------------------------------------------------------------------


def _symlink_kind(entry: os.DirEntry[str], root: Path) -> str | None:
    # Listed (never descended into) only when the target stays inside the workspace.
    try:
        target = Path(entry.path).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not target.is_relative_to(root):
        return None
    inner = target.relative_to(root).parts
    if inner and inner[0].casefold() == RESERVED_DIR:
        return None
    return "dir" if target.is_dir() else "file" if target.is_file() else None


def _walk(
    directory: Path, root: Path, recursive: bool, out: list[dict[str, Any]], *, top: bool
) -> None:
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except PermissionError:
        if top:
            raise
        return  # an unreadable subdirectory should not sink the whole listing
    for entry in entries:
        if len(out) > MAX_LIST_ENTRIES:
            return
        rel = Path(entry.path).relative_to(root)
        if rel.parts[0].casefold() == RESERVED_DIR:
            continue
        if entry.is_symlink():
            kind = _symlink_kind(entry, root)
            if kind is not None:
                size = Path(entry.path).stat().st_size if kind == "file" else None
                out.append({"path": rel.as_posix(), "type": kind, "size": size})
        elif entry.is_dir(follow_symlinks=False):
            out.append({"path": rel.as_posix(), "type": "dir", "size": None})
            if recursive:
                _walk(Path(entry.path), root, recursive, out, top=False)
        elif entry.is_file(follow_symlinks=False):
            size = entry.stat(follow_symlinks=False).st_size
            out.append({"path": rel.as_posix(), "type": "file", "size": size})


def _list_sync(workspace: Path, raw_path: str, recursive: bool) -> ToolOutput:
    directory = resolve_in_workspace(workspace, raw_path)
    rel = workspace_relative(workspace, directory)
    if not directory.exists():
        raise ToolError("FileNotFound", f"no such directory: {rel!r}")
    if not directory.is_dir():
        raise ToolError("NotADirectory", f"{rel!r} is a file, not a directory")
    entries: list[dict[str, Any]] = []
    try:
        _walk(directory, workspace.resolve(strict=False), recursive, entries, top=True)
    except PermissionError as exc:
        raise ToolError("PermissionDenied", f"permission denied listing {rel!r}") from exc
    truncated = len(entries) > MAX_LIST_ENTRIES
    entries = sorted(entries[:MAX_LIST_ENTRIES], key=lambda e: str(e["path"]).split("/"))
    payload = {"path": rel, "entries": entries, "truncated": truncated}
    summary = f"{len(entries)} entries in {rel!r}" + (" (truncated)" if truncated else "")
    return _json_output(payload, summary)


async def list_dir(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    """List a workspace directory as JSON ``{path, entries: [{path, type, size}], truncated}``.

    Entries are sorted, relative to the workspace root, exclude ``.agent/`` and are capped
    at MAX_LIST_ENTRIES.
    """
    _check_args(args)
    raw_path = _optional_str(args, "path", ".")
    recursive = _optional_bool(args, "recursive", False)
    return await asyncio.to_thread(_list_sync, ctx.workspace, raw_path, recursive)
