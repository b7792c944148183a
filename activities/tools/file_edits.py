"""edit_file: replace exactly one occurrence of a text in an existing workspace file.

A model asked to change one line rewrote a whole five-line config with write_file and left
one line; an exact-text edit changes what it names and keeps every other byte. Zero or
several occurrences are an error result saying how many (and where, by line number), never
a partial write. Same walk, symlink rules, atomic write and effects contract as write_file
(files.py): an interrupted call is settled from the file's text, never applied twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
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
from durable_agents.activities.tools.files import (
    file_path,
    open_regular,
    read_limited,
    unchanged_output,
    utf8,
)
from durable_agents.activities.tools.fs_errors import classified
from durable_agents.activities.tools.typed import output_of, tool
from durable_agents.activities.tools.workspace import WorkspacePath
from durable_agents.activities.tools.workspace_probe import appeared

__all__ = [
    "MAX_EDIT_BYTES",
    "edit_file",
    "edit_file_tool",
    "edit_result",
    "excerpt",
    "reconcile_edit_file",
    "text_of",
]

# The whole file is decoded and rewritten in memory; a text file past this is data, not
# something to edit by quoting it.
MAX_EDIT_BYTES = 8 * 1024 * 1024
# Occurrences counted before an error says "more than"; line numbers an error lists.
_MAX_COUNTED = 1000
_MAX_LINES_SHOWN = 5
# Places a reconcile tries as "where the edit went" before it calls the call in doubt.
_MAX_CANDIDATES = 64
# How much of old_text's first line a hint searches for.
_HINT_CHARS = 200
# A result shows the edited lines with this many lines around them, in at most this much.
_AROUND = 2
EXCERPT_CHARS = 1_000


def _occurrences(text: str, sub: str, limit: int) -> list[int]:
    """Where `sub` starts in `text`, overlapping ones too ("aa" is twice in "aaa"), at most
    `limit` of them."""
    found: list[int] = []
    at = text.find(sub)
    while at != -1 and len(found) < limit:
        found.append(at)
        at = text.find(sub, at + 1)
    return found


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _lines(text: str, places: list[int]) -> str:
    shown = ", ".join(str(_line_of(text, at)) for at in places[:_MAX_LINES_SHOWN])
    return shown + (", ..." if len(places) > _MAX_LINES_SHOWN else "")


def _squeezed(text: str) -> str:
    return " ".join(text.split()).casefold()


def _missing_hint(text: str, old: str) -> str:
    """Why old_text may not match, cheaply, in line numbers: never the file's content."""
    if "\r\n" in text and "\n" in old and "\r\n" not in old:
        return "the file's lines end in \\r\\n, old_text's in \\n"
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")[:_HINT_CHARS]
    if not first:
        return "old_text is only whitespace"
    lines = text.splitlines()
    exact = [n for n, line in enumerate(lines, 1) if first in line]
    if exact:
        shown = ", ".join(map(str, exact[:_MAX_LINES_SHOWN]))
        return f"its first line is on line {shown}, but what follows there differs"
    loose = _squeezed(first)
    near = [n for n, line in enumerate(lines, 1) if loose in _squeezed(line)]
    if near:
        shown = ", ".join(map(str, near[:_MAX_LINES_SHOWN]))
        return f"its first line matches line {shown} only if case and spacing are ignored"
    return "not even its first line is in the file"


def _only_occurrence(text: str, old: str, path: WorkspacePath) -> int:
    places = _occurrences(text, old, _MAX_COUNTED + 1)
    if len(places) == 1:
        return places[0]
    if not places:
        raise ToolError(
            "TextNotFound",
            f"old_text is not in {path.shown} ({_missing_hint(text, old)}); nothing was "
            "changed. Copy old_text exactly from read_file's result",
        )
    count = f"more than {_MAX_COUNTED}" if len(places) > _MAX_COUNTED else str(len(places))
    raise ToolError(
        "TextNotUnique",
        f"old_text occurs {count} times in {path.shown} (lines {_lines(text, places)}); "
        "nothing was changed. Add neighbouring lines to old_text so that it occurs once",
    )


def text_of(
    dir_fd: int, path: WorkspacePath, *, suggest: bool = True, tool_name: str = "edit_file"
) -> str:
    """The whole text of a file a tool (`tool_name`, for its errors) changes in memory."""
    fd = open_regular(dir_fd, path, suggest=suggest)
    try:
        if os.fstat(fd).st_size > MAX_EDIT_BYTES:
            raise ToolError(
                "FileTooLarge",
                f"{path.shown} is over the {MAX_EDIT_BYTES} byte limit of {tool_name}",
            )
        data = read_limited(fd, MAX_EDIT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_EDIT_BYTES:
        raise ToolError("FileTooLarge", f"{path.shown} grew past the {MAX_EDIT_BYTES} byte limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            "NotText", f"{path.shown} is not UTF-8 text; {tool_name} changes text files only"
        ) from None


def edit_result(
    path: WorkspacePath, text: str, data: bytes, line: int, new: str, already_applied: bool
) -> dict[str, Any]:
    """The result of an edit whose file now reads ``text`` (``data`` encoded), ``new`` put
    in at ``line``."""
    return {
        "path": path.rel,
        "line": line,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "already_applied": already_applied,
        "now_reads": excerpt(text, line, new.count("\n") + 1),
    }


def excerpt(text: str, line: int, lines: int) -> str:
    """Lines ``line`` to ``line + lines - 1`` of ``text`` (1-based) and two around them, at
    most EXCERPT_CHARS: what the file says where an edit landed, so the model sees its change
    instead of taking the result's figures on trust. Not numbered: a small model copies line
    numbers into the file when it writes it next (the result's ``line`` says where)."""
    every = text.splitlines()
    first, last = max(1, line - _AROUND), min(len(every), line + lines - 1 + _AROUND)
    shown = "\n".join(every[first - 1 : last])
    return shown if len(shown) <= EXCERPT_CHARS else shown[: EXCERPT_CHARS - 1] + "…"


def _refuse_unasked(dir_fd: int, path: WorkspacePath) -> None:
    """A call let through unasked because the file did not exist edits nothing: the file
    is still missing (FileNotFound), or it appeared since and nobody was asked."""
    os.close(open_regular(dir_fd, path))
    raise appeared(path.shown)


def _edit_sync(ctx: ToolContext, raw_path: str, old: str, new: str) -> dict[str, Any]:
    path = file_path(raw_path)
    with (
        classified("edit", path.shown),
        held_root(ctx.workspace) as root,
        held_dir(root, path.parent) as dir_fd,
    ):
        if "path" in ctx.must_be_new:
            _refuse_unasked(dir_fd, path)
        text = text_of(dir_fd, path)
        at = _only_occurrence(text, old, path)
        if old == new:
            # The file already says it: nothing to write, and nothing for the model to fix.
            line = _line_of(text, at)
            done = edit_result(path, text, text.encode("utf-8"), line, new, already_applied=True)
            return {**done, "unchanged": True}
        after = text[:at] + new + text[at + len(old) :]
        data = after.encode("utf-8")
        write_at(dir_fd, path.name, data)
    return edit_result(path, after, data, _line_of(text, at), new, already_applied=False)


def _current_text(ctx: ToolContext, path: WorkspacePath) -> str | None:
    with classified("read", path.shown), held_root(ctx.workspace) as root:
        try:
            with held_dir(root, path.parent, suggest=False) as dir_fd:
                return text_of(dir_fd, path, suggest=False)
        except ToolError as err:
            if err.error_type in ("FileNotFound", "NotADirectory"):
                return None
            raise


def _landed_at(current: str, old: str, new: str) -> list[int] | None:
    """Where this edit could have put `new` to give `current`: places q holding `new`
    such that `current` with `old` back at q has `old` exactly once, at q. None: too many
    places to try."""
    if new:
        places = _occurrences(current, new, _MAX_CANDIDATES + 1)
    else:
        places = list(range(min(len(current) + 1, _MAX_CANDIDATES + 1)))
    if len(places) > _MAX_CANDIDATES:
        return None
    landed = []
    for q in places:
        before = current[:q] + old + current[q + len(new) :]
        if _occurrences(before, old, 2) == [q]:
            landed.append(q)
    return landed


def _reconcile_sync(ctx: ToolContext, raw_path: str, old: str, new: str) -> dict[str, Any] | None:
    path = file_path(raw_path)
    if "path" in ctx.must_be_new:
        return None  # such a call never edits: running it again refuses again
    current = _current_text(ctx, path)
    if current is None:
        return None  # an edit never removes its file: running it says it is missing
    runnable = len(_occurrences(current, old, 2)) == 1
    landed = _landed_at(current, old, new)
    if landed is None or len(landed) > 1 or (runnable and landed):
        # E.g. "port = 80" -> "port = 8080": the new text holds the old one, so the file
        # reads the same before the edit as after it.
        raise EffectInDoubt(f"{path.shown} reads as it would both before and after this edit")
    if landed:
        line = _line_of(current, landed[0])
        return edit_result(path, current, current.encode("utf-8"), line, new, already_applied=True)
    # Not landed: running it applies it, or (old_text not there once) changes nothing.
    return None


def _texts(args: dict[str, Any]) -> tuple[str, str, str]:
    path, old, new = args.get("path"), args.get("old_text"), args.get("new_text")
    if not isinstance(path, str) or not isinstance(old, str) or not isinstance(new, str):
        raise ToolError("InvalidArguments", "edit_file takes a string path, old_text and new_text")
    return path, old, new


async def reconcile_edit_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput | None:
    """Settle an edit_file call an interrupted attempt may have applied, from the file.

    The file reads as after this edit and not as before it: it landed (``already_applied:
    true``, nothing rewritten). As before it and not after: safe to run. Both (the new
    text contains the old one), or too many places to tell: in doubt (EffectInDoubt).
    """
    path, old, new = _texts(args)
    if not old or old == new:
        return None  # never edits: running it again gives the same result
    done = await asyncio.to_thread(_reconcile_sync, ctx, path, old, new)
    return None if done is None else output_of("edit_file", done)


# Effectful, asking first when the file exists (`exists:path`): it changes a file a person
# may care about, like write_file replacing one. A call on a missing file fails unasked.
@tool(effect="effectful", approval="exists:path", reconcile=reconcile_edit_file, name="edit_file")
async def edit_file_tool(
    ctx: ToolContext, path: str, old_text: str, new_text: str
) -> dict[str, Any] | ToolOutput:
    """Change part of an existing UTF-8 text file in the workspace: replace the one
    place where old_text occurs with new_text and keep the rest of the file as it is.
    Prefer it to write_file for any change to an existing file. Returns JSON with path,
    line, bytes, sha256, already_applied and now_reads (the changed lines and two around
    them, as the file now reads).

    Args:
        path: Path relative to the workspace root, e.g. 'config/app.ini'.
        old_text: The exact text to replace, copied from the file, with enough of the
            lines around it to occur exactly once.
        new_text: The text to put in its place ('' deletes old_text).
    """
    if not old_text:
        raise ToolError(
            "InvalidArguments",
            "old_text is empty; give the exact text to replace (write_file creates files)",
        )
    utf8(old_text, "old_text")
    utf8(new_text, "new_text")
    done = await asyncio.to_thread(_edit_sync, ctx, path, old_text, new_text)
    return unchanged_output("edit_file", done) if done.pop("unchanged", False) else done


edit_file: ToolFn = edit_file_tool.fn
