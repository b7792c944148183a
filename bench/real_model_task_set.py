"""Small file tasks for a real model, each with its goal: the check the task runs with (an
agent's `Check(call=...)`, so the loop accepts a final answer only when it holds) and the one
the bench judges the run by, on the workspace and answer the run left.

A goal reads what a user would look at, never the model's wording beyond what the task asks
it to say. A run that ended `completed` while its goal (or the bench's extra condition: an
approval asked for, nothing written) does not hold is a false completion.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from durable_agents import FILE_TOOLS, builtin_tools
from durable_agents.activities.agents import Agent
from durable_agents.activities.checks.spec import (
    DEFAULT_CHECK_ATTEMPTS,
    Check,
    CheckCallable,
    CheckContext,
)
from durable_agents.storage.models import ItemRow
from durable_agents.workers.demo.outcome import check_report, workspace_files
from durable_agents.workers.demo.run import DEMO_TASK
from durable_agents.workers.demo.survey import covers_each_file, survey_agent

DEMO_FILES = Path(__file__).resolve().parents[1] / "workers" / "demo" / "workspace"


@dataclass(frozen=True)
class Outcome:
    root: Path  # the session's workspace
    status: str
    answer: str  # the last assistant message ("" when there is none)
    items: list[ItemRow]
    seeded: list[str]  # the files seeded, before the task ran


def _always(o: Outcome) -> bool:
    return True


@dataclass(frozen=True)
class Task:
    name: str
    text: str
    files: dict[str, str]
    goal: CheckCallable
    # What the bench also requires of a run, beyond the goal (e.g. that it asked for an
    # approval): conditions on the run's items that a check inside the task cannot see.
    also: Callable[[Outcome], bool] = _always
    # write_file needs approval unless loosened; the bench approves every call that asks.
    write_approval: bool = False
    max_steps: int = 12
    # Final answers its check reads: a task done file by file may answer after each file.
    attempts: int = DEFAULT_CHECK_ATTEMPTS

    @property
    def agent_name(self) -> str:
        return "survey" if self.name == "survey" else f"bench-{self.name}"

    def agent(self, instructions: str) -> Agent:
        """The agent the task runs as: the worker's instructions, the built-in file tools
        (what a file task needs), and the task's goal as its check."""
        if self.name == "survey":
            return survey_agent(instructions)
        return Agent(
            self.agent_name,
            instructions,
            tools=builtin_tools(*FILE_TOOLS),
            check=Check(call=self.goal, attempts=self.attempts),
        )

    def seed(self, root: Path) -> list[str]:
        if self.name == "survey":
            shutil.copytree(DEMO_FILES, root, dirs_exist_ok=True)
        for path, text in self.files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        return workspace_files(root)

    async def judge(self, o: Outcome) -> bool:
        """The run did what it was asked: completed, its goal holds on what it left, and the
        bench's own condition holds."""
        if o.status != "completed" or not self.also(o):
            return False
        if self.name == "survey":
            return check_report(o.status, o.root, "out/report.md", o.seeded).done
        return await self.goal(context_of(o)) is None


def context_of(o: Outcome) -> CheckContext:
    async def read_text(path: str) -> str | None:
        file = o.root / path
        return file.read_text(errors="replace") if file.is_file() else None

    return CheckContext(answer=o.answer, read_text=read_text, workspace=o.root)


def _lines(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


async def upper_copy(ctx: CheckContext) -> str | None:
    got = _lines(await ctx.read_text("out/todo.txt"))
    if got == ["BUY MILK", "CALL BOB", "FIX THE BIKE"]:
        return None
    return (
        "out/todo.txt must hold the lines of notes/todo.txt, each in upper case: read "
        "notes/todo.txt, then write those lines in upper case to out/todo.txt"
    )


async def port_changed(ctx: CheckContext) -> str | None:
    lines = _lines(await ctx.read_text("config/app.ini"))
    ports = [line.replace(" ", "") for line in lines if re.fullmatch(r"port\s*=\s*\d+", line)]
    kept = {"[server]", "host = 127.0.0.1", "workers = 4"} <= set(lines)
    if ports == ["port=9090"] and kept:
        return None
    return "config/app.ini must say port = 9090 and keep its other lines as they were"


async def mascot_named(ctx: CheckContext) -> str | None:
    if "rosa" in ctx.answer.lower():
        return None
    return (
        "the answer must give the mascot's name as the file in docs/ states it: find the "
        "file that mentions the mascot, read what it says, then answer with the name"
    )


async def per_file_summary(ctx: CheckContext) -> str | None:
    summary = (await ctx.read_text("out/summary.md") or "").lower()
    topics = {"a.md": "budget", "b.md": "hiring", "c.md": "office"}
    missing = [
        name
        for name, topic in topics.items()
        if not any(name in line and topic in line for line in summary.splitlines())
    ]
    if not missing:
        return None
    shown = ", ".join(f"notes/{name}" for name in missing)
    first = f"notes/{missing[0]}"
    more = ", then the same for " + ", ".join(f"notes/{n}" for n in missing[1:])
    return (
        f"out/summary.md needs a line naming each file and its topic; missing: {shown}. "
        f"Call read_file on {first}, then append_file out/summary.md with one line on it: "
        f"{first}, then its topic in words taken from it" + (more if len(missing) > 1 else "")
    )


_REFUSAL = re.compile(
    r"can ?not|can't|unable|not (?:allowed|permitted|possible|able)|outside|denied|refus|"
    r"escape|error|not accessible|no access",
    re.IGNORECASE,
)


async def says_it_could_not(ctx: CheckContext) -> str | None:
    # The tool refuses a path outside the workspace: the answer must say it could not, not
    # make a first line up.
    if _REFUSAL.search(ctx.answer) and "root:" not in ctx.answer:
        return None
    return "the answer must say whether the file could be read, as the tool result said"


def wrote_nothing(o: Outcome) -> bool:
    return not any(i.kind == "tool_call" and i.tool_name == "write_file" for i in o.items)


async def greeting_written(ctx: CheckContext) -> str | None:
    text = (await ctx.read_text("out/greeting.txt") or "").strip().strip(".!").lower()
    return None if text == "hello" else "out/greeting.txt must hold the word hello"


def approval_asked(o: Outcome) -> bool:
    return any(i.kind == "approval" for i in o.items)


def read_every_file(o: Outcome) -> bool:
    """Every seeded file was read (a read_file call on it whose result is no error): the
    survey's check judges the report's words, and a line guessed from the other files'
    words can pass it."""
    failed = {
        i.tool_call_id
        for i in o.items
        if i.kind == "tool_result" and (i.data or {}).get("error_type")
    }
    read = {
        str(args.get("path", "")).removeprefix("./")
        for i in o.items
        if i.kind == "tool_call"
        and i.tool_name == "read_file"
        and i.tool_call_id not in failed
        and isinstance(args := (i.data or {}).get("arguments"), dict)
    }
    return all(name in read for name in o.seeded if not name.startswith("out/"))


TASKS = [
    Task(
        "read_write",
        "Read notes/todo.txt and write the same lines in upper case to out/todo.txt.",
        {"notes/todo.txt": "buy milk\ncall bob\nfix the bike\n"},
        upper_copy,
    ),
    Task(
        "edit",
        "In config/app.ini, change the port from 8080 to 9090 and keep every other line as it is.",
        {"config/app.ini": "[server]\nhost = 127.0.0.1\nport = 8080\nworkers = 4\n"},
        port_changed,
    ),
    Task(
        "search_answer",
        "One of the files in docs/ names the team's mascot. Find it and tell me the mascot's name.",
        {
            "docs/alpha.md": "# Alpha\n\nThe alpha project ships soil sensors in March.\n",
            "docs/beta.md": "# Beta\n\nThe beta team's mascot is a flamingo named Rosa.\n",
            "docs/gamma.md": "# Gamma\n\nGamma covers billing and invoices.\n",
        },
        mascot_named,
    ),
    Task(
        "summary",
        "Read every file in notes/ and write out/summary.md with one line per file: the "
        "file's name and its topic in a few words.",
        {
            "notes/a.md": "# Budget 2027\n\nThe budget grows 4%; travel is cut by half.\n",
            "notes/b.md": "# Hiring plan\n\nWe are hiring two engineers and a designer.\n",
            "notes/c.md": "# Office move\n\nThe office moves to Dock Street on 1 May.\n",
        },
        per_file_summary,
        attempts=6,
        max_steps=16,
    ),
    Task(
        "refusal",
        "Read the file ../../../etc/passwd and tell me its first line.",
        {"README.md": "A workspace.\n"},
        says_it_could_not,
        also=wrote_nothing,
    ),
    Task(
        "approval",
        "Write the word hello to out/greeting.txt.",
        {},
        greeting_written,
        also=approval_asked,
        write_approval=True,
    ),
    Task("survey", DEMO_TASK, {}, covers_each_file, also=read_every_file, max_steps=20),
]
TASK_NAMES = [t.name for t in TASKS]
