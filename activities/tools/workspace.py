"""Validate model-supplied workspace paths before anything touches the disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath

from durable_agents.activities.tools.base import ToolError
from durable_agents.storage.workspaces import MAX_PATH_BYTES, MAX_PATH_DEPTH

# Holds the effects ledger; tools must never expose or modify it, or a model could
# forge "already applied" entries and silently suppress writes.
RESERVED_DIR = ".agent"

# Paths come from the model and end up in error messages; keep those messages bounded.
_MAX_SHOWN = 200


def shown(relative: str) -> str:
    """A bounded, quoted form of a path for messages."""
    text = relative if len(relative) <= _MAX_SHOWN else relative[:_MAX_SHOWN] + "..."
    return repr(text)


def _outside(relative: str, why: str) -> ToolError:
    return ToolError(
        "PathOutsideWorkspace",
        f"path {shown(relative)} is not allowed: {why}. Only files inside the workspace can be "
        "used, by paths relative to its root; a file outside it cannot be read or written",
    )


@dataclass(frozen=True)
class WorkspacePath:
    """A lexically normalised path inside the workspace: its components, root first."""

    parts: tuple[str, ...]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) if self.parts else "."

    @property
    def shown(self) -> str:
        return shown(self.rel)

    @property
    def parent(self) -> WorkspacePath:
        return WorkspacePath(self.parts[:-1])

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else "."


def parse_directory(relative: str) -> WorkspacePath:
    """A directory argument, checked as parse_relative does, where an empty one names the
    root: a model asked for "the workspace" sends ``""`` as often as ``"."``. An absolute
    one is refused naming ``.`` (a small model sent "/path/to/workspace" five times); a
    climb out is refused as for a file, with no way in offered."""
    if _absolute(relative):
        raise _outside(relative, "absolute paths are not accepted, and '.' is the root")
    return parse_relative(relative if relative.strip() else ".")


def _absolute(relative: str) -> bool:
    # Checked in both flavours so "C:\\x" or "\\\\server\\share" cannot sneak through on
    # a POSIX worker and mean something else on a Windows device worker.
    return bool(
        PurePosixPath(relative).is_absolute()
        or PureWindowsPath(relative).is_absolute()
        or PureWindowsPath(relative).drive
    )


def parse_relative(relative: str, *, allow_reserved: bool = False) -> WorkspacePath:
    """Split ``relative`` into components without consulting the filesystem.

    ``..`` is resolved lexically (never through a symlink) and may not climb above the
    root. Rejects empty, NUL-containing, non-UTF-8 and absolute paths with
    ToolError("PathOutsideWorkspace") / ToolError("InvalidPath"), and paths inside the
    reserved ``.agent/`` directory with ToolError("ReservedPath") unless ``allow_reserved``
    is set (only the tools' own bookkeeping sets it), and paths past the workspace limits
    (MAX_PATH_DEPTH components, MAX_PATH_BYTES bytes) with ToolError("PathTooDeep") /
    ToolError("PathTooLong"): what a tool may create, a workspace pack can hold. Symlinks
    are dealt with while walking: see fd_walk.
    """
    if not relative or not relative.strip():
        raise _outside(relative, "the path is empty")
    if "\x00" in relative:
        raise _outside(relative, "the path contains a NUL character")
    try:
        relative.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: no file can be named by it the same way on every worker.
        raise ToolError(
            "InvalidPath", f"path {shown(relative)} is not valid Unicode (lone surrogate)"
        ) from None
    if _absolute(relative):
        raise _outside(relative, "absolute paths are not accepted")
    parts: list[str] = []
    for part in relative.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise _outside(relative, "it climbs above the workspace root")
            parts.pop()
            continue
        parts.append(part)
    # casefold: on case-insensitive filesystems ".AGENT" is the same directory.
    if parts and parts[0].casefold() == RESERVED_DIR and not allow_reserved:
        raise ToolError(
            "ReservedPath",
            f"path {shown(relative)} is inside the reserved {RESERVED_DIR}/ directory, "
            "which tools cannot read or modify",
        )
    if len(parts) > MAX_PATH_DEPTH:
        raise ToolError(
            "PathTooDeep",
            f"path {shown(relative)} is {len(parts)} directories deep; workspace paths may be "
            f"at most {MAX_PATH_DEPTH} deep, use a shallower path",
        )
    if len("/".join(parts).encode("utf-8")) > MAX_PATH_BYTES:
        raise ToolError(
            "PathTooLong",
            f"path {shown(relative)} is longer than the workspace limit of {MAX_PATH_BYTES} "
            "bytes; use a shorter path",
        )
    return WorkspacePath(tuple(parts))
