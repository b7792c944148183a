"""The tasks of an evaluation (`agentctl eval TASKS.yaml`): a YAML list of tasks, each
`{name, text, check?, max_steps?, project?}`, where `check`, `max_steps` and `project` are
the start options of the same names, as `agentctl start` and POST /v1/sessions take them.

Read here into names, texts and options, shape only; whether a start accepts them is the
start's own rules' (workers/client/evals.py builds each start with `start_command` before
any task starts). A refusal names the task and the field, in our words: never a line of the
file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from durable_agents.activities.policies.text_limits import check_text

# A tasks file is read whole: bounded before it is parsed.
MAX_FILE_BYTES = 1024 * 1024
MAX_TASKS = 100
MAX_NAME_CHARS = 64
# What a task names besides its name and text: start options, taken as the start takes them.
OPTIONS = ("check", "max_steps", "project")
FIELDS = ("name", "text", *OPTIONS)


class EvalTaskError(ValueError):
    """A tasks file no evaluation runs; `task` and `field` say where (None: the file)."""

    def __init__(self, task: str | None, field: str | None, message: str) -> None:
        where = "" if task is None else f"task {task}"
        if field is not None:
            where = f"{where}, {field}" if where else field
        super().__init__(f"{where}: {message}" if where else message)
        self.task = task
        self.field = field


@dataclass(frozen=True)
class EvalTask:
    """One task: its name (unique in the file), its text and its start options."""

    name: str
    text: str
    options: dict[str, Any] = field(default_factory=dict)


def eval_tasks(source: bytes) -> list[EvalTask]:
    """The tasks of a tasks file's bytes (EvalTaskError naming what is wrong)."""
    if len(source) > MAX_FILE_BYTES:
        raise EvalTaskError(None, None, f"a tasks file is at most {MAX_FILE_BYTES} bytes")
    try:
        data = yaml.safe_load(source.decode("utf-8"))
    except UnicodeDecodeError:
        raise EvalTaskError(None, None, "the tasks file is not UTF-8 text") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"
        raise EvalTaskError(None, None, f"the tasks file is not valid YAML{at}") from None
    if not isinstance(data, list) or not data:
        raise EvalTaskError(
            None, None, "the tasks file is a list of tasks, each {name, text, check?, ...}"
        )
    if len(data) > MAX_TASKS:
        raise EvalTaskError(None, None, f"at most {MAX_TASKS} tasks, got {len(data)}")
    tasks: list[EvalTask] = []
    for index, entry in enumerate(data, start=1):
        task = _task(index, entry)
        if any(t.name == task.name for t in tasks):
            raise EvalTaskError(repr(task.name), "name", "two tasks have this name")
        tasks.append(task)
    return tasks


def _task(index: int, entry: object) -> EvalTask:
    if not isinstance(entry, dict):
        raise EvalTaskError(f"#{index}", None, "a task is a mapping of name, text, check, ...")
    name = entry.get("name")
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name) > MAX_NAME_CHARS
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
    ):
        raise EvalTaskError(
            f"#{index}", "name", f"a task's name is 1-{MAX_NAME_CHARS} printable characters"
        )
    where = repr(name)
    unknown = sorted(str(k) for k in entry if k not in FIELDS)
    if unknown:
        raise EvalTaskError(where, unknown[0][:60], f"not a field of a task ({', '.join(FIELDS)})")
    text = entry.get("text")
    if text is None:
        raise EvalTaskError(where, "text", "a task needs its text")
    try:
        check_text("text", text)
    except ValueError as err:
        raise EvalTaskError(where, None, str(err)) from None
    options = {k: entry[k] for k in OPTIONS if k in entry}
    return EvalTask(name, text, options)
