"""A made-up absolute path, read as the workspace path it most likely means, for its error to
name the call to make instead. Told only that absolute paths are refused and "'.' is the
root", a small model (Qwen2.5-Coder 0.5B) sent list_dir "/path/to/workspace" again until it
was stuck, or answered with the error's text; an error naming the call with the path
replaced drew that call.

The path is never used, only offered: the model's next call goes through the tools' own
checks. What is offered exists below the root, found as the tools find it (one component at
a time, no symlink followed), so an offer tells nothing the model could not list."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durable_agents.activities.tools.base import ToolError
from durable_agents.activities.tools.fd_walk import held_dir, held_root, open_dir
from durable_agents.activities.tools.workspace import WorkspacePath, parse_relative
from durable_agents.storage.workspaces import MAX_PATH_DEPTH

# A call offered in an error is shown at most this long (its other arguments are the model's).
MAX_OFFER_CHARS = 300


def meant_inside(workspace: Path, raw: str, *, directory: bool) -> WorkspacePath | None:
    """For an absolute POSIX ``raw`` ("/workspace/src/app.py"), its longest tail that names a
    file below ``workspace`` (with ``directory``, a directory, else the root itself); None
    when ``raw`` is not such a path or, for a file, no tail names one."""
    if not raw.startswith("/") or "\x00" in raw:
        return None
    parts = [p for p in raw.split("/") if p not in ("", ".")][-MAX_PATH_DEPTH:]
    try:
        with held_root(workspace) as root:
            for start in range(len(parts)):
                try:
                    path = parse_relative("/".join(parts[start:]))
                except ToolError:
                    continue
                if path.parts and _names(root, path, directory):
                    return path
    except (OSError, ToolError):
        return None
    return WorkspacePath(()) if directory else None


def _names(root: int, path: WorkspacePath, directory: bool) -> bool:
    try:
        if directory:
            os.close(open_dir(root, path, suggest=False))
            return True
        with held_dir(root, path.parent, suggest=False) as parent:
            return stat.S_ISREG(os.stat(path.name, dir_fd=parent, follow_symlinks=False).st_mode)
    except (OSError, ToolError):
        return False


def call_instead(tool: str, arguments: Mapping[str, Any], path: WorkspacePath) -> str:
    """ "Call TOOL with {...}": the model's own call with its path replaced by ``path`` (only
    the path when the call is long)."""
    offered = json.dumps({**arguments, "path": path.rel}, ensure_ascii=False)
    if len(offered) > MAX_OFFER_CHARS:
        return f"Call {tool} again with path {json.dumps(path.rel, ensure_ascii=False)}"
    return f"Call {tool} with {offered}"


def absolute_refused(
    exc: ToolError, workspace: Path, tool: str, arguments: Mapping[str, Any], *, directory: bool
) -> ToolError:
    """``exc`` (a refused path) with the call to make instead when the path was a made-up
    absolute one that means a workspace path; else ``exc`` itself. A file no tail names
    gets the listing to find it."""
    raw = arguments.get("path")
    if exc.error_type != "PathOutsideWorkspace" or not isinstance(raw, str):
        return exc
    meant = meant_inside(workspace, raw, directory=directory)
    if meant is not None:
        offer = call_instead(tool, arguments, meant)
    elif raw.startswith("/"):
        offer = 'Call list_dir with {"path": ".", "recursive": true} to see the files\' paths'
    else:
        return exc
    return ToolError(exc.error_type, f"{exc.message}. {offer}")
