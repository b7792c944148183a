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
# A failure names the lines to keep while the workspace has at most this many files.
_NAMED_FILES = 10
# What a line on a file names from it: a report that could be written from names alone
# does not pass (survey_gaps).
_QUOTED = "a title, column names, function names"


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
    read = f"Call read_file on {gaps[0]}" + (", then the others" if len(gaps) > 1 else "")
    # What is wrong, said as it is: an unnamed file and a named one without a word of its
    # contents need different fixes.
    unnamed = unnamed_in(report, files)
    quiet = [name for name in gaps if name not in unnamed]
    wrong = " and ".join(
        ([f"does not name {_names(unnamed)}"] if unnamed else [])
        + ([f"names nothing in {_names(quiet)}"] if quiet else [])
    )
    # The lines that passed named, to be kept: told only what was missing, a small model
    # wrote a report of those alone, each write replacing the last.
    kept = [name for name in files if name not in gaps]
    keep = f" (keep its lines on {_names(kept)})" if kept and len(files) <= _NAMED_FILES else ""
    return (
        f"{REPORT_PATH} {wrong}{keep}. {read}; then write_file {REPORT_PATH} with one line "
        f"for each of the {len(files)} files, its path first: what the file holds, naming "
        f"things in it ({_QUOTED})"
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
    "A survey goes in three steps. First list every file (list_dir with recursive true). "
    "Then read each file with read_file, one call per file. Only then write the report with "
    "write_file: one line per file, its path and what it holds, in your own words."
)


def survey_agent(instructions: str) -> Agent:
    return Agent(
        SURVEY_AGENT,
        f"{instructions}\n\n{SURVEY_STEPS}",
        # A survey reads every file: search_files, of FILE_TOOLS, only draws a small model
        # into searching for file names.
        tools=builtin_tools("list_dir", "read_file", "write_file", "edit_file"),
        check=Check(files=[REPORT_PATH], call=covers_each_file),
    )
