"""Two trajectories (storage/trajectories.py) side by side: the first step where they part,
and why.

Steps are compared in order, each on what the model did: the tools it called (another
call), their arguments (other arguments, naming the keys), the results its calls got
(another result: content or error), and, for a step that called nothing, its answer
(another answer). Then their lengths and endings. The words name tools, argument keys,
error types and statuses; never an argument's value, a result or a reply's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable_agents.storage.trajectories import Call, Result, Step, Trajectory

ANOTHER_CALL = "another call"
OTHER_ARGUMENTS = "other arguments"
ANOTHER_RESULT = "another result"
ANOTHER_ANSWER = "another answer"
ENDED_EARLIER = "ended earlier"
ENDED_LATER = "ended later"
ANOTHER_ENDING = "another ending"
# Tool names and argument keys are the model's: shown clipped.
_MAX_NAME = 64
_MISSING = object()


@dataclass(frozen=True)
class Divergence:
    """Where the second trajectory first parts from the first: the step, the reason (one of
    the constants above) and our words on what differed."""

    step: int
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"step {self.step}: {self.reason} ({self.detail})"


def first_divergence(
    first: Trajectory, second: Trajectory, *, ended: bool = True
) -> Divergence | None:
    """The first step where `second` differs from `first`, or None. `ended`: whether
    `second` has ended; while it runs, a trajectory shorter than `first` is no divergence
    yet."""
    for a, b in zip(first.steps, second.steps, strict=False):
        found = step_divergence(a, b)
        if found is not None:
            return found
    mine, theirs = len(first.steps), len(second.steps)
    if theirs > mine:
        return Divergence(
            second.steps[mine].step, ENDED_LATER, f"{theirs} steps where the first has {mine}"
        )
    if not ended:
        return None
    if theirs < mine:
        return Divergence(
            first.steps[theirs].step,
            ENDED_EARLIER,
            f"{second.status} after {theirs} steps where the first has {mine}",
        )
    if first.status != second.status and first.steps:
        return Divergence(
            first.steps[-1].step, ANOTHER_ENDING, f"{second.status} where the first {first.status}"
        )
    return None


def step_divergence(a: Step, b: Step) -> Divergence | None:
    """How step `b` differs from step `a`, or None."""
    names_a, names_b = [c.name for c in a.calls], [c.name for c in b.calls]
    if names_a != names_b:
        words = f"called {_names(names_b)} where the first called {_names(names_a)}"
        return Divergence(a.step, ANOTHER_CALL, words)
    for x, y in zip(a.calls, b.calls, strict=True):
        keys = differing_keys(x.arguments, y.arguments)
        if keys:
            return Divergence(a.step, OTHER_ARGUMENTS, f"{_clip(x.name)}: {', '.join(keys)}")
    for x, y in zip(a.calls, b.calls, strict=True):
        differs = _result_difference(x, y)
        if differs is not None:
            return Divergence(a.step, ANOTHER_RESULT, f"{_clip(x.name)}: {differs}")
    if not a.calls and a.text != b.text:
        return Divergence(a.step, ANOTHER_ANSWER, "the final text differs")
    return None


def differing_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The argument keys whose values differ between `a` and `b` (one present in only
    one of them too), sorted and clipped: never a value."""
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k, _MISSING) != b.get(k, _MISSING))
    return [_clip(k) for k in keys]


def _result_difference(x: Call, y: Call) -> str | None:
    """Our words on how two results of the same call differ (None: alike, or one has none
    yet)."""
    if x.result is None or y.result is None:
        return None
    if _outcome(x.result) == _outcome(y.result):
        return None
    if x.result.error_type != y.result.error_type:
        return f"{_error(y.result)} where the first got {_error(x.result)}"
    return "its content differs"


def _outcome(result: Result) -> tuple[str | None, str | None]:
    return result.sha256, result.error_type


def _error(result: Result) -> str:
    return "a result" if result.error_type is None else f"error {_clip(result.error_type)}"


def _names(names: list[str]) -> str:
    return ", ".join(_clip(n) for n in names) if names else "no tool (an answer)"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 1] + "…"
