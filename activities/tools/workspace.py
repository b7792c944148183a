"""Confine model-supplied paths to the session workspace."""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from activities.tools.base import ToolError

# Holds the effects ledger; tools must never expose or modify it, or a model could
# forge "already applied" entries and silently suppress writes.
RESERVED_DIR = ".agent"

# Paths come from the model and end up in error messages; keep those messages bounded.
_MAX_SHOWN = 200


def _shown(relative: str) -> str:
    text = relative if len(relative) <= _MAX_SHOWN else relative[:_MAX_SHOWN] + "..."
    return repr(text)


def _outside(relative: str, why: str) -> ToolError:
    return ToolError(
        "PathOutsideWorkspace",
        f"path {_shown(relative)} is not allowed: {why}; use a path relative to the workspace root",
    )


def resolve_in_workspace(workspace: Path, relative: str, *, allow_reserved: bool = False) -> Path:
    """Return the absolute, symlink-free path for ``relative`` inside ``workspace``.

    Rejects empty or NUL-containing paths, absolute paths, ``..`` escapes and symlinks
    that lead outside the root with ToolError("PathOutsideWorkspace"). Paths inside the
    reserved ``.agent/`` directory raise ToolError("ReservedPath") unless
    ``allow_reserved`` is set (only the tools' own bookkeeping should set it).
    """
    if not relative or not relative.strip():
        raise _outside(relative, "the path is empty")
    if "\x00" in relative:
        raise _outside(relative, "the path contains a NUL character")
    # Checked in both flavours so "C:\\x" or "\\\\server\\share" cannot sneak through on
    # a POSIX worker and mean something else on a Windows device worker.
    if (
        PurePosixPath(relative).is_absolute()
        or PureWindowsPath(relative).is_absolute()
        or PureWindowsPath(relative).drive
    ):
        raise _outside(relative, "absolute paths are not accepted")

    root = workspace.resolve(strict=False)
    try:
        # Following symlinks here is the point: the check below then sees the real target.
        resolved = (root / relative).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop on Python 3.11
        raise _outside(relative, f"it cannot be resolved ({type(exc).__name__})") from exc

    if not resolved.is_relative_to(root):
        raise _outside(relative, "it resolves outside the workspace")

    inner = resolved.relative_to(root).parts
    # casefold: on case-insensitive filesystems ".AGENT" is the same directory.
    if inner and inner[0].casefold() == RESERVED_DIR and not allow_reserved:
        raise ToolError(
            "ReservedPath",
            f"path {_shown(relative)} is inside the reserved {RESERVED_DIR}/ directory, "
            "which tools cannot read or modify",
        )
    return resolved


def workspace_relative(workspace: Path, resolved: Path) -> str:
    """Return ``resolved`` (from resolve_in_workspace) as a POSIX path relative to the root."""
    inner = resolved.relative_to(workspace.resolve(strict=False))
    return inner.as_posix() if inner.parts else "."
