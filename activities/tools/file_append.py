"""append_file: add lines at the end of a workspace text file, creating it if missing.

A report built one line at a time keeps every line written before: a small model asked to
rewrite a four-file report after reading the files pasted their contents over it. Each call
adds its text on lines of its own and never changes a byte already there. Same walk, symlink
rules, atomic write and effects contract as write_file (files.py): an interrupted call is
settled from the file's end, never applied twice without saying so.
"""

from __future__ import annotations

import asyncio
from typing import Any

from durable_agents.activities.tools.atomic_write import write_at
from durable_agents.activities.tools.base import (
    EffectInDoubt,
    ToolContext,
    ToolError,
    ToolFn,
    ToolOutput,
)
from durable_agents.activities.tools.fd_walk import held_dir, held_root
from durable_agents.activities.tools.file_edits import MAX_EDIT_BYTES, edit_result, text_of
from durable_agents.activities.tools.files import file_path, utf8
from durable_agents.activities.tools.fs_errors import classified
from durable_agents.activities.tools.typed import output_of, tool
from durable_agents.activities.tools.workspace import WorkspacePath
from durable_agents.activities.tools.workspace_probe import appeared

__all__ = ["append_file", "append_file_tool", "reconcile_append_file"]


def _lines_of(content: str) -> str:
    """``content`` as whole lines: ending in a newline."""
    return content if content.endswith("\n") else content + "\n"


def _joined(current: str, added: str) -> str:
    """``current`` with ``added`` on lines of its own after it."""
    if current and not current.endswith("\n"):
        return current + "\n" + added
    return current + added


def _appended(
    path: WorkspacePath, text: str, line: int, added: str, already_applied: bool
) -> dict[str, Any]:
    """The result of an append whose file now reads ``text``, ``added`` from ``line``: an
    edit's, its lines shown as they now read."""
    data = text.encode("utf-8")
    return edit_result(path, text, data, line, added.removesuffix("\n"), already_applied)


def _first_line_of_end(text: str, added: str) -> int:
    """The 1-based line where ``added``, at the end of ``text``, begins."""
    return text.count("\n", 0, len(text) - len(added)) + 1


def _append_sync(ctx: ToolContext, raw_path: str, added: str) -> dict[str, Any]:
    path = file_path(raw_path)
    # Let through unasked because nothing was there: whatever appeared since is kept.
    new_only = "path" in ctx.must_be_new
    with (
        classified("append", path.shown),
        held_root(ctx.workspace) as root,
        held_dir(root, path.parent, create=True) as dir_fd,
    ):
        current = _text_or_none(dir_fd, path)
        if current is not None and new_only:
            raise appeared(path.shown)
        after = _joined(current or "", added)
        data = after.encode("utf-8")
        if len(data) > MAX_EDIT_BYTES:
            raise ToolError(
                "FileTooLarge",
                f"{path.shown} would pass the {MAX_EDIT_BYTES} byte limit of append_file",
            )
        try:
            write_at(dir_fd, path.name, data, replace=current is not None)
        except FileExistsError:
            raise appeared(path.shown) from None
    return _appended(path, after, _first_line_of_end(after, added), added, already_applied=False)


def _text_or_none(dir_fd: int, path: WorkspacePath) -> str | None:
    try:
        return text_of(dir_fd, path, suggest=False, tool_name="append_file")
    except ToolError as err:
        if err.error_type == "FileNotFound":
            return None
        raise


def _reconcile_sync(ctx: ToolContext, raw_path: str, added: str) -> dict[str, Any] | None:
    path = file_path(raw_path)
    with classified("read", path.shown), held_root(ctx.workspace) as root:
        try:
            with held_dir(root, path.parent, suggest=False) as dir_fd:
                current = _text_or_none(dir_fd, path)
        except ToolError as err:
            if err.error_type in ("FileNotFound", "NotADirectory"):
                return None  # nothing there: the append did not land
            raise
    if current is None or not current.endswith(added):
        # Not at the end: it did not land (nothing ran on this session's files after it).
        return None
    before = current[: len(current) - len(added)]
    if before.endswith(added) or (before == "" and "path" not in ctx.must_be_new):
        # The same lines twice in a row, or a file of exactly them that may have held them
        # before: the file reads as it would both before and after this append.
        raise EffectInDoubt(f"{path.shown} ends as it would both before and after this append")
    line = _first_line_of_end(current, added)
    return _appended(path, current, line, added, already_applied=True)


def _texts(args: dict[str, Any]) -> tuple[str, str]:
    path, content = args.get("path"), args.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        raise ToolError("InvalidArguments", "append_file takes a string path and content")
    return path, content


async def reconcile_append_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput | None:
    """Settle an append_file call an interrupted attempt may have applied, from the file.

    The file ends with this call's lines and did not already before them: it landed
    (``already_applied: true``, nothing added again). It does not end with them: safe to
    run. Ending with them twice over (or being exactly them, where a file was there
    before): in doubt (EffectInDoubt), as appending again could double them.
    """
    path, content = _texts(args)
    if not content.strip():
        return None  # never appends: running it again gives the same error
    done = await asyncio.to_thread(_reconcile_sync, ctx, path, _lines_of(content))
    return None if done is None else output_of("append_file", done)


# Effectful, asking first when the file exists (`exists:path`): adding lines changes a file
# a person may care about, as an edit does. On a missing file it creates it unasked.
@tool(
    effect="effectful", approval="exists:path", reconcile=reconcile_append_file, name="append_file"
)
async def append_file_tool(ctx: ToolContext, path: str, content: str) -> dict[str, Any]:
    """Add lines at the end of a UTF-8 text file in the workspace, creating it (and its
    parent directories) if missing; every line already in the file is kept. Returns JSON
    with path, line (where the new lines begin), bytes, sha256, already_applied and
    now_reads (the added lines and two before them).

    Args:
        path: Path relative to the workspace root, e.g. 'out/report.md'.
        content: The lines to add, e.g. one line about a file you read.
    """
    if not content.strip():
        raise ToolError("InvalidArguments", "content is empty; give the lines to add")
    added = _lines_of(content)
    utf8(added)
    return await asyncio.to_thread(_append_sync, ctx, path, added)


append_file: ToolFn = append_file_tool.fn
