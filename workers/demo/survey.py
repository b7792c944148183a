"""The demo's agent: the worker's own instructions, the built-in tools a survey needs, and the
demo's goal as its check, so the task completes only with a report that covers every workspace
file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from durable_agents.activities.agents import Agent
from durable_agents.activities.checks.spec import Check, CheckContext
from durable_agents.activities.providers.offline import REPORT_PATH
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.workers.demo.outcome import survey_gaps, unnamed_in

SURVEY_AGENT = "survey"
# The files a survey covers: at most this many, each read up to the check's own limit.
_MAX_FILES = 50
# What a line on a file names from it: a report that could be written from names alone
# does not pass (survey_gaps).
_QUOTED = "a title, column names, function names"
# Final answers the survey's check reads before the task ends check_failed.
SURVEY_ATTEMPTS = 8


async def covers_each_file(ctx: CheckContext) -> str | None:
    """None when the report covers every file of the workspace (but itself and out/)."""
    report = await ctx.read_text(REPORT_PATH)
    if report is None:
        return f"{REPORT_PATH} was not written"
    files: dict[str, str] = {}
    for name in _workspace_files(ctx.workspace)[:_MAX_FILES]:
        files[name] = await ctx.read_text(name) or ""
    gaps = survey_gaps(report, files)
    if not gaps:
        return None
    # The next call named outright: told to "read each of them", a small model wrote
    # "This is the content of README.md" for each without reading one.
    first = gaps[0]
    # What is wrong, said as it is: an unnamed file and a named one without a word of its
    # contents need different fixes.
    unnamed = unnamed_in(report, files)
    quiet = [name for name in gaps if name not in unnamed]
    wrong = " and ".join(
        ([f"does not name {_names(unnamed)}"] if unnamed else [])
        + ([f"names nothing in {_names(quiet)}"] if quiet else [])
    )
    # Where it counts, said outright: a small model put a made-up title and a blank line
    # between a file's name and what it pasted of it, and appended the same again.
    where = " (only what follows a file's name, up to a blank line, counts)" if quiet else ""
    # One file at a time, added to what is there: told to write the whole report again
    # after reading the files, a small model pasted their contents over it.
    others = "the other file" if len(gaps) == 2 else f"the other {len(gaps) - 1} files"
    more = f", then the same for {others}" if len(gaps) > 1 else ""
    return (
        f"{REPORT_PATH} {wrong}{where}. Call read_file on {first}, then append_file {REPORT_PATH} "
        f"with one line on it: {first}, then what it holds in your own words, naming things "
        f"in it ({_QUOTED}){more}"
    )


def _names(paths: Sequence[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _workspace_files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.relative_to(root).parts[0] != "out"
    )


# How a survey is done, after the worker's own instructions: a small model left to itself
# writes the report from the listing, names and sizes, and never opens a file.
SURVEY_STEPS = (
    "A survey goes file by file. First list every file (list_dir with recursive true). "
    "Then, for each file in turn: read it with read_file, then add one line on it to the "
    "report with append_file: its path and what it holds, in your own words."
)


def survey_agent(instructions: str) -> Agent:
    return Agent(
        SURVEY_AGENT,
        f"{instructions}\n\n{SURVEY_STEPS}",
        # A survey reads every file: search_files, of FILE_TOOLS, only draws a small model
        # into searching for file names. append_file adds a file's line to the report as
        # soon as the file is read; write_file writes a report whole.
        tools=builtin_tools("list_dir", "read_file", "append_file", "write_file"),
        # The report is the task's own output: its lines go in unasked.
        approvals={"append_file": "outside:out"},
        # Made file by file, a survey may be answered after each file's line: a try for
        # each of the demo's four files, and some to spare.
        check=Check(files=[REPORT_PATH], call=covers_each_file, attempts=SURVEY_ATTEMPTS),
    )
