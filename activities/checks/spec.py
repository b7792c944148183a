"""What a task's check asks: files that must exist, text they must contain, a command that
must pass, or a Python callable. An agent declares any of these (`Agent(check=...)`); a
start may declare files and texts only, which are data: a command or callable from a
caller would be code run on the worker, so only a deployed agent definition names them.

Pure: no I/O here (activities/checks/runner.py runs a check).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A start's check travels in its request and is kept with the session: bounded like the
# other options (activities/policies/task_rules.py).
MAX_CHECK_FILES = 16
MAX_CHECK_TEXTS = 16
MAX_CHECK_PATH_CHARS = 200
MAX_CHECK_TEXT_CHARS = 200
MAX_CHECK_ATTEMPTS = 10
DEFAULT_CHECK_ATTEMPTS = 3
# A command check's limits: its time, and how much of its output its reason quotes.
MAX_COMMAND_ARGS = 32
DEFAULT_COMMAND_SECONDS = 60.0
MAX_COMMAND_SECONDS = 600.0


class CheckSpecError(ValueError):
    """A check no door accepts; `field` names where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# The task's calls a callable check is shown, at most: its newest (a call's arguments are
# up to 256 KiB, so a check holds at most ~50 MiB of them).
MAX_CALLS_SEEN = 200


@dataclass(frozen=True)
class CallDone:
    """A tool call of the task whose result came back without an error."""

    name: str
    arguments: Mapping[str, Any]


class CheckContext:
    """What a callable check sees: the task's workspace (read it with `read_text`, which
    stays inside it), the final answer the model gave (`answer`) and the task's tool calls
    that returned without an error (`calls`, oldest first, the newest MAX_CALLS_SEEN): what
    the task read, not only what it left. A check that reads neither the answer nor the
    calls judged the workspace alone (`answer_read` and `calls_read` stay False): its failure
    stands until a tool changes the workspace, so the model is held to tool calls until one
    has (activities/context/call_expected.py); one that read the calls may pass after a call
    that changed nothing, a read."""

    def __init__(
        self,
        answer: str,
        read_text: Callable[[str], Awaitable[str | None]],
        workspace: Path,
        calls: Sequence[CallDone] = (),
    ) -> None:
        self._answer = answer
        self.read_text = read_text
        self.workspace = workspace
        self._calls = tuple(calls)
        self.answer_read = False
        self.calls_read = False

    @property
    def answer(self) -> str:
        self.answer_read = True
        return self._answer

    @property
    def calls(self) -> tuple[CallDone, ...]:
        self.calls_read = True
        return self._calls


# A callable check: None when the task is done, else the reason it is not, in words the
# model can act on (they are told to it, and recorded as the task's last error when the
# check fails for good: name what is missing, never quote content).
CheckCallable = Callable[[CheckContext], Awaitable[str | None]]


@dataclass(frozen=True)
class Check:
    # Workspace paths that must exist as files.
    files: Sequence[str] = ()
    # Path -> texts the file must contain (case-insensitive); the path must exist too.
    contains: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # A command run in the workspace as the tools' user; it passes when it exits 0.
    command: Sequence[str] = ()
    command_seconds: float = DEFAULT_COMMAND_SECONDS
    call: CheckCallable | None = None
    # How many final answers are checked before the task ends check_failed.
    attempts: int = DEFAULT_CHECK_ATTEMPTS
    # Also run before each model step that follows tool results (activities/check_guide.py):
    # while it fails, whatever the answer, the reply must call a tool, and the reason
    # follows the latest result. Agent-declared, without a command (it would run each step).
    guide: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(self, "contains", {k: tuple(v) for k, v in self.contains.items()})
        object.__setattr__(self, "command", tuple(self.command))
        _check_data(self.files, self.contains)
        if len(self.command) > MAX_COMMAND_ARGS or not all(
            isinstance(a, str) and a and "\0" not in a for a in self.command
        ):
            raise CheckSpecError(
                "check.command", f"a check's command is 1-{MAX_COMMAND_ARGS} non-empty strings"
            )
        if not 0 < self.command_seconds <= MAX_COMMAND_SECONDS:
            raise CheckSpecError(
                "check.command_seconds", f"command_seconds must be > 0, <= {MAX_COMMAND_SECONDS}"
            )
        _check_attempts(self.attempts)
        if self.guide and self.command:
            raise CheckSpecError(
                "check.guide", "a check with a command does not guide: it would run every step"
            )
        if not (self.files or self.contains or self.command or self.call):
            raise CheckSpecError("check", "a check names files, contains, a command or a call")

    def declared(self) -> dict[str, Any]:
        """What a start may declare of it, as kept with the session."""
        return {
            "files": list(self.files),
            "contains": {k: list(v) for k, v in self.contains.items()},
            "attempts": self.attempts,
        }

    @classmethod
    def from_start(cls, given: object) -> Check:
        """A start's check as a door received it (a JSON object): files, contains and
        attempts only. CheckSpecError in fixed words otherwise."""
        if isinstance(given, Check):
            if given.command or given.call is not None:
                raise CheckSpecError(
                    "check",
                    "a start's check names files and texts only; a command or a callable is "
                    "declared on the agent",
                )
            return given
        if not isinstance(given, Mapping):
            raise CheckSpecError("check", "check must be a JSON object")
        unknown = sorted(str(k) for k in given if k not in ("files", "contains", "attempts"))
        if unknown:
            shown = unknown[0][:60]
            words = (
                "a start's check names files and texts only; a command or a callable is "
                "declared on the agent"
                if shown in ("command", "call")
                else f"{shown} is not a field of a check (files, contains, attempts)"
            )
            raise CheckSpecError(f"check.{shown}", words)
        files = given.get("files", [])
        contains = given.get("contains", {})
        if not isinstance(files, list):
            raise CheckSpecError("check.files", "check.files must be a list of paths")
        if not isinstance(contains, Mapping) or not all(
            isinstance(v, list) for v in contains.values()
        ):
            raise CheckSpecError(
                "check.contains", "check.contains must map a path to a list of texts"
            )
        attempts = given.get("attempts", DEFAULT_CHECK_ATTEMPTS)
        _check_attempts(attempts)
        return cls(files=files, contains=dict(contains), attempts=attempts)


def _check_attempts(attempts: object) -> None:
    if (
        isinstance(attempts, bool)
        or not isinstance(attempts, int)
        or not 1 <= attempts <= MAX_CHECK_ATTEMPTS
    ):
        raise CheckSpecError(
            "check.attempts", f"check.attempts must be a whole number 1-{MAX_CHECK_ATTEMPTS}"
        )


def _check_data(files: Sequence[object], contains: Mapping[Any, Sequence[object]]) -> None:
    paths = [*files, *contains]
    if len(paths) > MAX_CHECK_FILES:
        raise CheckSpecError("check.files", f"a check names at most {MAX_CHECK_FILES} files")
    for path in paths:
        if not isinstance(path, str) or not path.strip() or len(path) > MAX_CHECK_PATH_CHARS:
            raise CheckSpecError(
                "check.files", f"a check's path is 1-{MAX_CHECK_PATH_CHARS} characters"
            )
        if _has_control(path):
            raise CheckSpecError("check.files", "a check's path contains a control character")
    for texts in contains.values():
        if len(texts) > MAX_CHECK_TEXTS:
            raise CheckSpecError(
                "check.contains", f"a check names at most {MAX_CHECK_TEXTS} texts per file"
            )
        for text in texts:
            if not isinstance(text, str) or not text.strip() or len(text) > MAX_CHECK_TEXT_CHARS:
                raise CheckSpecError(
                    "check.contains", f"a check's text is 1-{MAX_CHECK_TEXT_CHARS} characters"
                )
            if _has_control(text):
                raise CheckSpecError(
                    "check.contains", "a check's text contains a control character"
                )


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)
