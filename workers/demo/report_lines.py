"""add_to_report: the survey's own tool, one line on one workspace file added to the report.

A report line is `- PATH: WHAT IT HOLDS`, on one line: the file's path first, then the
model's words. The tool writes the line itself, so no title or blank line can come between
a name and its words (the check counts only what follows a name, up to a blank line). It
refuses a path that names no file (a line on a made-up file is no survey) and a line the
survey's check would not count for its file, saying why, so the model learns it at the call
rather than from a failed check after its answer.
Effects as append_file's: an interrupted call is settled from the report's end.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

from durable_agents.activities.checks.runner import CHECK_READ_BYTES
from durable_agents.activities.providers.offline import REPORT_PATH
from durable_agents.activities.tools.base import ToolContext, ToolError, ToolOutput
from durable_agents.activities.tools.fd_walk import held_dir, held_root
from durable_agents.activities.tools.file_append import append_file, reconcile_append_file
from durable_agents.activities.tools.files import (
    file_path,
    open_regular,
    read_workspace_text,
    unchanged_output,
)
from durable_agents.activities.tools.fs_errors import classified
from durable_agents.activities.tools.typed import output_of, tool
from durable_agents.workers.demo.outcome import (
    MAX_SURVEYED,
    OUT_DIR,
    survey_gaps,
    surveyed_files,
    words_that_count,
)

__all__ = ["MAX_SAID_CHARS", "add_to_report_tool", "report_line"]

# What a line says of a file, at most (the demo's files are 174-425 bytes).
MAX_SAID_CHARS = 600
# Files without a line a result names, at most.
_SHOWN_LEFT = 10
# Words a refusal offers that would make a line count, at most.
_SHOWN_WORDS = 5


def report_line(path: str, summary: str) -> str:
    """The report's line on `path` (a workspace path as file_path gives it): its words on one
    line, their runs of spaces and line breaks made one space."""
    said = " ".join(summary.split())
    if not said:
        raise ToolError("InvalidArguments", "summary is empty: say what the file holds")
    if len(said) > MAX_SAID_CHARS:
        raise ToolError(
            "InvalidArguments",
            f"summary is {len(said)} characters; say what the file holds in at most "
            f"{MAX_SAID_CHARS}, in your own words",
        )
    return f"- {path}: {said}\n"


async def _survey_texts(ctx: ToolContext) -> dict[str, str]:
    """The files a survey covers, each read as the survey's check reads it."""
    files = (await asyncio.to_thread(surveyed_files, ctx.workspace))[:MAX_SURVEYED]
    return {
        name: await read_workspace_text(ctx.workspace, name, CHECK_READ_BYTES) or ""
        for name in files
    }


def _judged(rel: str, line: str, texts: dict[str, str]) -> None:
    """Refuses a line the survey's check would not count for its file, asking for a
    different summary and naming words of the file that would count: a small model told
    only why its line fell short, or to send it "again", sends the same line word for word."""
    if rel not in survey_gaps(line, texts):
        return
    words, own = words_that_count(rel, texts, _SHOWN_WORDS)
    only = "only that file holds" if own else "that file holds"
    such = f", such as {', '.join(words)}" if words else ""
    raise ToolError(
        "InvalidArguments",
        f"this line would not count for {rel}: it does not name anything {only}. Write a "
        f"different summary of {rel} that names things {'only it holds' if own else 'in it'}"
        f"{such}, and call add_to_report with it",
    )


async def _left(ctx: ToolContext, texts: dict[str, str] | None = None) -> dict[str, Any]:
    """Which files the report does not cover yet (as the survey's check judges), and what to
    do next: after its lines on all four files, a small model went on to add one on the
    report."""
    report = await read_workspace_text(ctx.workspace, REPORT_PATH, CHECK_READ_BYTES) or ""
    if texts is None:
        texts = await _survey_texts(ctx)
    left = list(survey_gaps(report, texts))
    if not left:
        return {"files_left": [], "next": "every file has its line: answer now"}
    return {
        "files_left": left[:_SHOWN_LEFT],
        "next": f"read_file {left[0]}, then add_to_report on it",
    }


def _surveyed(ctx: ToolContext, raw_path: str) -> str:
    """`raw_path` as the report names it, once it is known to be a file of the workspace
    other than the report."""
    path = file_path(raw_path)
    if path.rel == REPORT_PATH:
        raise ToolError("InvalidArguments", f"{REPORT_PATH} is the report, not a file it covers")
    if PurePosixPath(path.rel).parts[0] == OUT_DIR:
        raise ToolError(
            "InvalidArguments",
            f"{path.rel} is under {OUT_DIR}/, where the task writes: a survey covers the "
            "files outside it",
        )
    with (
        classified("read", path.shown),
        held_root(ctx.workspace) as root,
        held_dir(root, path.parent) as dir_fd,
    ):
        os.close(open_regular(dir_fd, path))
    return path.rel


def _appended(path: str, summary: str) -> dict[str, Any]:
    return {"path": REPORT_PATH, "content": report_line(file_path(path).rel, summary)}


async def _reconcile(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput | None:
    path, summary = args.get("path"), args.get("summary")
    if not isinstance(path, str) or not isinstance(summary, str):
        raise ToolError("InvalidArguments", "add_to_report takes a string path and summary")
    try:
        appended = _appended(path, summary)
    except ToolError:
        return None  # never writes: running it again refuses again
    return await reconcile_append_file(replace(ctx, must_be_new=frozenset()), appended)


# Effectful and unasked: it only ever adds a line to the task's own report.
@tool(effect="effectful", reconcile=_reconcile, name="add_to_report")
async def add_to_report_tool(ctx: ToolContext, path: str, summary: str) -> ToolOutput:
    """Add one line on a workspace file you have read to the report (out/report.md): the
    file's path, then what it holds. Returns JSON with the report's path, line, bytes,
    sha256, already_applied, now_reads (the report's last lines), files_left (the files the
    report does not cover yet) and next; a line the report already holds is not added again
    (unchanged).

    Args:
        path: The file's path relative to the workspace root, e.g. 'src/app.py'.
        summary: What the file holds, in your own words, naming things in it.
    """
    try:
        rel = await asyncio.to_thread(_surveyed, ctx, path)
    except ToolError as err:
        # Said with what is left: a line on the report itself, or on a file that is not
        # there, is a small model's way of going on after the last file.
        # The path is the file the line is about, named outright: told "read_file X, then
        # add_to_report on it" right after reading X, a small model reads X again and sends
        # the same line on the report.
        left = await _left(ctx)
        files = left["files_left"]
        then = (
            f"add_to_report with path {files[0]} and a summary of what {files[0]} holds"
            if files
            else left["next"]
        )
        raise ToolError(err.error_type, f"{err.message}; next: {then}") from None
    appended = _appended(rel, summary)
    texts = await _survey_texts(ctx)
    if rel not in texts:  # past the survey's MAX_SURVEYED files: judged all the same
        own = await read_workspace_text(ctx.workspace, rel, CHECK_READ_BYTES) or ""
        texts = {**texts, rel: own}
    _judged(rel, appended["content"], texts)
    report = await read_workspace_text(ctx.workspace, REPORT_PATH, CHECK_READ_BYTES) or ""
    if appended["content"] in report.splitlines(keepends=True):
        # The same line again adds nothing: after a failed check, a small model read the
        # file and added its line word for word, over and over.
        left = await _left(ctx, texts)
        return unchanged_output(
            "add_to_report", {"path": REPORT_PATH, "line": appended["content"].strip()} | left
        )
    # Its `path` names the surveyed file, never the report: no policy on it reaches the write.
    done = await append_file(replace(ctx, must_be_new=frozenset()), appended)
    told: dict[str, Any] = json.loads(done.content)
    return output_of("add_to_report", told | await _left(ctx, texts))
