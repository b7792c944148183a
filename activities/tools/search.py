"""The search_files tool: the lines of workspace text files that hold a given text.

A literal, case-insensitive match (no regular expressions: a pattern from a model is
untrusted, and a backtracking one could hang the worker). The walk is list_dir's; each file
is opened fd-relative without following symlinks, as read_file opens one. Bounded in every
direction: files looked at, bytes read, matches returned, characters of a line shown.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from durable_agents.activities.tools.absolute_paths import absolute_refused
from durable_agents.activities.tools.base import ToolContext, ToolError, ToolFn
from durable_agents.activities.tools.fd_walk import held_dir, held_root, open_dir
from durable_agents.activities.tools.files import file_path, open_regular, read_limited
from durable_agents.activities.tools.fs_errors import classified
from durable_agents.activities.tools.listing import walk
from durable_agents.activities.tools.typed import tool
from durable_agents.activities.tools.workspace import parse_directory

MAX_MATCHES = 50
# A file larger than this is not searched (data, not text to quote a line of).
MAX_FILE_BYTES = 1024 * 1024
# What one search reads at most, over every file.
MAX_SEARCH_BYTES = 32 * 1024 * 1024
MAX_TEXT_CHARS = 200
# A line is shown up to this many characters, around its match.
LINE_CHARS = 200
# A file with a NUL byte in its first this many bytes is binary: not searched.
_SNIFF = 8192


def _lines_with(data: bytes, needle: str, most: int) -> list[tuple[int, str]]:
    """At most ``most`` (line number, line) pairs of ``data`` holding ``needle``."""
    if b"\0" in data[:_SNIFF]:
        return []
    text = data.decode("utf-8", errors="replace")
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if len(found) == most:
            break
        at = line.casefold().find(needle)
        if at >= 0:
            start = max(0, min(at - LINE_CHARS // 4, len(line) - LINE_CHARS))
            found.append((number, line[start : start + LINE_CHARS].strip()))
    return found


def _search_sync(workspace: Path, text: str, raw_path: str) -> dict[str, Any]:
    needle = text.casefold()
    try:
        top_path = parse_directory(raw_path)
    except ToolError as exc:
        asked = {"text": text, "path": raw_path}
        raise absolute_refused(exc, workspace, "search_files", asked, directory=True) from None
    matches: list[dict[str, Any]] = []
    searched = skipped = 0
    budget = MAX_SEARCH_BYTES
    with classified("search", top_path.shown), held_root(workspace) as root:
        top = open_dir(root, top_path)
        try:
            entries, truncated, _ = walk(top, top_path.parts, recursive=True)
        finally:
            os.close(top)
        for entry in entries:
            if len(matches) > MAX_MATCHES:
                break  # enough to say there are more
            if entry["type"] != "file":
                continue
            if entry["size"] > min(MAX_FILE_BYTES, budget):
                skipped += 1
                continue
            path = file_path(entry["path"])
            try:
                with held_dir(root, path.parent, suggest=False) as dir_fd:
                    fd = open_regular(dir_fd, path, suggest=False)
                try:
                    data = read_limited(fd, MAX_FILE_BYTES)
                finally:
                    os.close(fd)
            except (ToolError, OSError):
                skipped += 1  # removed or swapped for a symlink since the walk
                continue
            budget -= len(data)
            searched += 1
            # One more than the limit is kept, so the result can say there were more.
            most = MAX_MATCHES + 1 - len(matches)
            matches += [
                {"path": path.rel, "line": n, "text": line}
                for n, line in _lines_with(data, needle, most)
            ]
    if len(matches) > MAX_MATCHES:
        truncated, matches = True, matches[:MAX_MATCHES]
    return {
        "text": text,
        "path": top_path.rel,
        "matches": matches,
        "files_searched": searched,
        "files_skipped": skipped,
        "truncated": truncated,
    }


@tool(
    effect="read_only",
    name="search_files",
    description=(
        "Find the lines of the workspace's text files that contain a text (case-insensitive, "
        "not a regular expression), in a directory and everything below it. Returns JSON "
        f"matches {{path, line, text}}, at most {MAX_MATCHES}; 'truncated' tells whether "
        "more exist."
    ),
)
async def search_files_tool(ctx: ToolContext, text: str, path: str = ".") -> dict[str, Any]:
    """Search the text files under a workspace directory for the lines holding ``text``.

    Args:
        text: The text to look for, e.g. 'mascot' (case-insensitive).
        path: Directory relative to the workspace root to search in ('.' for all of it).
    """
    if not text.strip():
        raise ToolError("InvalidArguments", "text is empty; give the words to look for")
    if len(text) > MAX_TEXT_CHARS:
        raise ToolError("InvalidArguments", f"text is over {MAX_TEXT_CHARS} characters")
    return await asyncio.to_thread(_search_sync, ctx.workspace, text, path)


search_files: ToolFn = search_files_tool.fn
