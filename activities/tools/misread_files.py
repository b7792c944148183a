"""A read_file call that found no file where it asked, and the call to make instead, for its
error to name: a directory is listed, a file's name found elsewhere in the workspace is read
there. Told only "not a regular file" and "no such file", a small model (Qwen2.5-Coder 0.5B)
read "notes/", "data/" and "summary.py" (which is src/summary.py) by turns until it was
stuck.

What is offered was found as list_dir finds it (no symlink followed, never `.agent/`, at
most its entries), so an offer tells nothing a listing would not."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from durable_agents.activities.tools.absolute_paths import call_instead
from durable_agents.activities.tools.base import ToolError
from durable_agents.activities.tools.fd_walk import open_dir
from durable_agents.activities.tools.listing import walk
from durable_agents.activities.tools.workspace import WorkspacePath, shown

# Files of the asked name found elsewhere, at most this many named.
MAX_OFFERED = 3


def misread(exc: ToolError, root: int, path: WorkspacePath, asked: Mapping[str, Any]) -> ToolError:
    """``exc`` (read_file's error on ``path``, below the open ``root``) with the call to make
    instead, when there is one; else ``exc`` itself."""
    if exc.error_type == "NotAFile" and _is_dir(root, path):
        listing = call_instead("list_dir", {}, path)
        return ToolError(exc.error_type, f"{path.shown} is a directory. {listing} to see its files")
    if exc.error_type != "FileNotFound" or not path.parts:
        return exc
    try:
        found = named_elsewhere(root, path)
    except OSError:  # an offer is a help: a walk that fails leaves the error as it was
        return exc
    if not found:
        return exc
    if len(found) == 1:
        offer = call_instead("read_file", asked, found[0])
        return ToolError(exc.error_type, f"no such file: {path.shown}. {offer}")
    named = ", ".join(p.shown for p in found[:MAX_OFFERED])
    more = " and more" if len(found) > MAX_OFFERED else ""
    return ToolError(
        exc.error_type,
        f"no such file: {path.shown}; files named {shown(path.name)} are at {named}{more}",
    )


def named_elsewhere(root: int, path: WorkspacePath) -> list[WorkspacePath]:
    """The files below ``root`` outside ``path``'s directory whose name is ``path``'s
    (ignoring case), shallowest first, among what a recursive listing of the workspace
    holds."""
    entries, _, _ = walk(root, (), recursive=True)
    want = path.name.casefold()
    found = [
        WorkspacePath(tuple(str(e["path"]).split("/")))
        for e in entries
        if e["type"] == "file" and str(e["path"]).rsplit("/", 1)[-1].casefold() == want
    ]
    # Its own directory's close names are did_you_mean's (near_names.py).
    elsewhere = (p for p in found if p.parent != path.parent)
    return sorted(elsewhere, key=lambda p: (len(p.parts), p.parts))


def _is_dir(root: int, path: WorkspacePath) -> bool:
    try:
        os.close(open_dir(root, path, suggest=False))
    except (OSError, ToolError):
        return False
    return True
