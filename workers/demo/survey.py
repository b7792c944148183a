"""The demo's agent: the worker's own instructions, the built-in tools a survey needs, and the
demo's goal as its check, so the task completes only with a report that covers every workspace
file."""

from __future__ import annotations

from collections.abc import Sequence

from durable_agents.activities.agents import Agent
from durable_agents.activities.checks.spec import CallDone, Check, CheckContext
from durable_agents.activities.providers.offline import REPORT_PATH
from durable_agents.activities.tools.base import ToolError
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.activities.tools.files import file_path, write_file_tool
from durable_agents.workers.demo.outcome import (
    MAX_SURVEYED,
    survey_gaps,
    surveyed_files,
    unnamed_in,
)
from durable_agents.workers.demo.report_lines import add_to_report_tool

SURVEY_AGENT = "survey"
# What a line on a file names from it: a report that could be written from names alone
# does not pass (survey_gaps).
_QUOTED = "a title, column names, function names"
# Final answers the survey's check reads before the task ends check_failed.
SURVEY_ATTEMPTS = 8


async def covers_each_file(ctx: CheckContext) -> str | None:
    """None when the report covers every file of the workspace (but itself and out/)."""
    # No report yet is a report naming no file: its reason names the first call to make
    # (told only that the report does not exist, a small model tries to read it).
    written = await ctx.read_text(REPORT_PATH)
    report = written or ""
    files: dict[str, str] = {}
    for name in surveyed_files(ctx.workspace)[:MAX_SURVEYED]:
        files[name] = await ctx.read_text(name) or ""
    unsaid = survey_gaps(report, files)
    # A line on a file the task never read is a guess, however well it reads: the words of
    # the files it did read can describe it. The calls are looked at only once the report
    # covers every file: a failure the report alone decides then stands until a tool
    # changes the workspace (CheckContext), and the model is held to tool calls until one
    # has; answers are not offered after a read that cannot mend it.
    read = _read_paths(ctx.calls) if not unsaid else set(files)
    gaps = [name for name in files if name in unsaid or name not in read]
    if not gaps:
        return None if written is not None else f"{REPORT_PATH} was not written"
    # The next call named outright: told to "read each of them", a small model wrote
    # "This is the content of README.md" for each without reading one.
    first = gaps[0]
    # What is wrong, said as it is: an unnamed file and a named one without a word of its
    # contents need different fixes.
    unnamed = unnamed_in(report, files)
    quiet = [name for name in unsaid if name not in unnamed]
    guessed = [name for name in gaps if name not in unsaid]
    wrong = " and ".join(
        (["was not written"] if written is None else [])
        + ([f"does not name {_names(unnamed)}"] if unnamed and written is not None else [])
        + ([f"names nothing in {_names(quiet)}"] if quiet else [])
        + ([f"describes {_names(guessed)}, never read"] if guessed else [])
    )
    # Where it counts, said outright: a small model put a made-up title and a blank line
    # between a file's name and what it pasted of it, and appended the same again.
    where = " (only what follows a file's name, up to a blank line, counts)" if quiet else ""
    # One file at a time, added to what is there: told to write the whole report again
    # after reading the files, a small model pasted their contents over it.
    others = "the other file" if len(gaps) == 2 else f"the other {len(gaps) - 1} files"
    more = f", then the same for {others}" if len(gaps) > 1 else ""
    return (
        f"{REPORT_PATH} {wrong}{where}. Call read_file on {first}, then add_to_report with "
        f"path {first} and a summary of what it holds in your own words, naming things in it "
        f"({_QUOTED}){more}"
    )


def _read_paths(calls: Sequence[CallDone]) -> set[str]:
    """The workspace paths the task's read_file calls read."""
    read = set()
    for call in calls:
        path = call.arguments.get("path")
        if call.name == "read_file" and isinstance(path, str):
            try:
                read.add(file_path(path).rel)
            except ToolError:
                continue
    return read


def _names(paths: Sequence[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


# How a survey is done, after the worker's own instructions: a small model left to itself
# writes the report from the listing, names and sizes, and never opens a file. What a line
# names is said by the kind of file: told only "naming things in it", a small model
# describes a table by where its rows come from, never naming a column.
SURVEY_STEPS = (
    "A survey goes file by file. First list every file (list_dir with recursive true). "
    "Then, for each file in turn: read it with read_file, then call add_to_report with its "
    "path and a summary of what it holds in your own words, naming things in it (" + _QUOTED + "): "
    "for a table, its columns; for code, the functions it defines; for notes, what they say "
    "happened."
)


def survey_agent(instructions: str, *, by_line: bool = True) -> Agent:
    """The survey's agent. `by_line` (a real model): a line per file, added with
    add_to_report as soon as the file is read; given write_file too, the 1.5B model wrote
    the report over after each line, the names left out. Else (the offline model, which
    writes the report whole from what it read, a write that asks a person first): write_file.
    """
    # A survey reads every file: search_files, of FILE_TOOLS, only draws a small model into
    # searching for file names.
    reads = builtin_tools("list_dir", "read_file")
    return Agent(
        SURVEY_AGENT,
        f"{instructions}\n\n{SURVEY_STEPS}" if by_line else instructions,
        tools=[*reads, add_to_report_tool if by_line else write_file_tool],
        # Made file by file, a survey may be answered after each file's line: a try for
        # each of the demo's four files, and some to spare.
        check=Check(call=covers_each_file, attempts=SURVEY_ATTEMPTS),
    )
