"""Which replies are no answer, though they hold text: the judgement made of a reply that
called no tool before the loop takes it as the task's final answer.

Small local models (Qwen2.5-Coder 1.5B and 0.5B on llama-server, issue 41) ended tasks as
`completed` with replies like these: the arguments of ``write_file`` as bare JSON with no tool
named; "you can use the following steps" over calls of ``<path>`` and ``...``; a reply cut
at its token limit; markup alone; "I will read the lines from notes/todo.txt, convert them
and write them to out/todo.txt" with no call. Each is a NonAnswer code: the loop tells the
model what its reply was and what to send instead.

Pure functions, no I/O; what a model wrote is untrusted and only ever judged, never quoted:
the judgement holds a code and, for bare arguments, names from the offered tools.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.providers.prose_calls import (
    EXAMPLE_FRAMING,
    TOOL_NAME,
    call_of,
    fits_schema,
    holds_placeholder,
    json_objects,
)
from durable_agents.activities.providers.text_tool_calls import is_bare_markup
from durable_agents.vocabulary.non_answers import CUT_FINISH_REASONS, NonAnswer

# Bare arguments may come with a line or two of prose ("Here is the file:"): past this many
# characters around the object, the reply is taken to say something of its own.
LITTLE_PROSE = 300
# How many tools a nudge names when the arguments fit several equally well.
MAX_NAMED = 3
_FENCE_MARK = re.compile(r"```[A-Za-z0-9_-]*")
# A sentence that says what the model does next: "I will read", "Let me now list", "I'll
# re-run the list_dir tool". Up to three words between ("I will first carefully read"), none
# of them a negation ("I will not write", "I cannot read": no promise).
_PROMISE = re.compile(
    r"\b(?:I will|I'll|I am going to|I'm going to|let me|I need to|I should|I must)"
    r"((?:\s+[\w-]+){0,3}?)\s+"
    r"(?:read|re-?read|write|list|open|check|call|use|edit|look|search|create|update|change"
    r"|fetch|run|re-?run|add|modify|convert|save|inspect|view)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:not|never|no)\b|n't\b", re.IGNORECASE)
# What makes a promise one of a call: it names an offered tool or a path ("notes/todo.txt",
# "app.ini"). Only this much of a reply's end is judged: a promise of a next call closes it.
_PATH = re.compile(r"[\w.-]+/[\w./-]*|\b[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}\b")
_SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")
PROMISE_TAIL_CHARS = 600


@dataclass(frozen=True)
class Judged:
    """What a reply was: a code, and for BARE_ARGUMENTS the offered tools whose arguments
    it looks like (names from the tools offered, never from the reply)."""

    code: NonAnswer
    tools: tuple[str, ...] = ()


def non_answer_of(text: str, finish_reason: str, tools: Sequence[ToolSpec]) -> Judged | None:
    """What a reply that called no tool is, when it is no answer; None for an answer.
    ``tools``: the tools it was offered (none for a request that offers none)."""
    if finish_reason in CUT_FINISH_REASONS:
        return Judged(NonAnswer.CUT_AT_LIMIT)
    if is_bare_markup(text):
        return Judged(NonAnswer.EMPTY)
    if not tools:
        return None
    found = bare_arguments_for(text, tools)
    if found:
        return Judged(NonAnswer.BARE_ARGUMENTS, found)
    if shows_example_calls(text):
        return Judged(NonAnswer.EXAMPLE_CALLS)
    if promises_a_call(text, [t.name for t in tools]):
        return Judged(NonAnswer.PROMISED_CALL)
    return None


def promises_a_call(text: str, tools: Sequence[str]) -> bool:
    """The end of ``text`` says which call comes next and makes none: a sentence of its last
    PROMISE_TAIL_CHARS says "I will read/write/list/..." (no negation) and names one of
    ``tools`` or a path."""
    for sentence in _SENTENCE.split(text[-PROMISE_TAIL_CHARS:]):
        promise = _PROMISE.search(sentence)
        if promise is None or _NEGATION.search(promise.group(0)):
            continue
        if "let me know" in sentence.casefold():
            continue
        rest = sentence[promise.start() :]
        if _PATH.search(rest) or any(name in rest for name in tools):
            return True
    return False


def bare_arguments_for(text: str, tools: Sequence[ToolSpec]) -> tuple[str, ...]:
    """The tools whose arguments ``text`` is, when it is one JSON object (alone, fenced, or
    with a little prose) naming no tool, with every required argument of a tool and none it
    does not declare; the tools that require the most of what it holds, in offered order.
    () when it is anything else."""
    objects = json_objects(text)
    if len(objects) != 1:
        return ()
    found = objects[0]
    if call_of(found.value) is not None:
        return ()
    around = text[: found.start] + text[found.end :]
    if len(_FENCE_MARK.sub("", around).strip()) > LITTLE_PROSE:
        return ()
    fitting = [t for t in tools if fits_schema(found.value, t.parameters)]
    if not fitting:
        return ()
    most = max(_required(t) for t in fitting)
    return tuple(t.name for t in fitting if _required(t) == most)[:MAX_NAMED]


def shows_example_calls(text: str) -> bool:
    """``text`` shows tool calls instead of making them: a call-shaped object in it holds a
    placeholder for an argument (``<path>``, ``...``), or the prose presents its calls as
    an example ("you can use the following")."""
    calls = [
        call
        for found in json_objects(text)
        if (call := call_of(found.value)) is not None and TOOL_NAME.fullmatch(call.name)
    ]
    if not calls:
        return False
    return (
        any(holds_placeholder(call.arguments) for call in calls)
        or EXAMPLE_FRAMING.search(text) is not None
    )


def _required(tool: ToolSpec) -> int:
    required = tool.parameters.get("required")
    return len(required) if isinstance(required, list) else 0
