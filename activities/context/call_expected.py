"""Whether the turn a model step answers asks for a tool call.

- A call whose arguments were not JSON: its error says to call again, so the next reply
  must call (Qwen2.5-Coder 1.5B, told of a malformed call, answered from nothing and made
  up the code word it was asked to read). Not when the reply was cut at its limit.
- A failed check: its words say to do the task with the tools, so the next reply must
  call. A check that judged the workspace alone (files, texts, a command, a callable that
  never read the answer) stands until a tool has changed the workspace: no answer can
  pass it before, so until then every reply must call (the 1.5B, told its report missed
  three files, read them and then answered with the report's text instead of writing it).
  That holds only while the agent offers a tool that can change the workspace.
- A nudge, a user's own message, a tool's own error: nothing; the model may answer them.

A provider that can hold the reply to a call is asked to (ModelRequest.call_required).

Apart from what it asks: a tool whose call came to nothing new (a read with the same result
as one just before it: activities/repeated_calls.py; a write of what the file held; the same
failing call as before) in the latest reply, or in the replies before it that came to
nothing new either, is withheld from the next reply's choice (ModelRequest.withheld). Told
"nothing new", the 0.5B model made the same call until stuck; offered the other tools, it
called the next one the task needed. Withheld for one reply only, it went round between two
tools that each came to nothing new; withheld both, it called the third (add_to_report, with
a summary of the file it had read twice)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.tools.base import Tool, ToolRegistry
from durable_agents.storage.models import ItemRow
from durable_agents.storage.tool_effects import EffectState
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.item_marks import (
    CHECK_FAILED,
    CHECK_KEY,
    CHECK_STANDS_KEY,
    FAILED_CALL_KEY,
)
from durable_agents.vocabulary.non_answers import CUT_FINISH_REASONS

# An effectful call settled as one of these changed the workspace (or whatever it acts on).
_CHANGED = frozenset({EffectState.COMPLETED, EffectState.RECONCILED})


class CallAsked(Enum):
    NOTHING = "nothing"
    # The next reply must call a tool.
    CALL = "call"
    # Every reply must call a tool until one changes the workspace, where a tool can.
    CHANGE = "change"


def call_asked(rows: Sequence[ItemRow]) -> CallAsked:
    """What the conversation ``rows`` (in order) asks of its next reply."""
    replied = False  # a reply came after the turn found so far
    changed = False  # an effectful call completed after it
    malformed = False  # the latest reply holds a call whose arguments were not JSON
    for row in reversed(rows):
        data = row.data or {}
        if row.kind == ItemKind.TOOL_RESULT:
            changed = changed or (data.get("effect") in _CHANGED and not data.get("unchanged"))
        elif row.kind == ItemKind.TOOL_CALL and not replied:  # the latest reply's calls
            arguments = data.get("arguments")
            malformed = malformed or (
                isinstance(arguments, dict) and RAW_ARGUMENTS_KEY in arguments
            )
        elif row.kind == ItemKind.ASSISTANT_MESSAGE:
            # A call cut at the reply's limit is not asked again: forced to call at once, a
            # small model writes the same runaway content to the limit again.
            if not replied and malformed and data.get("finish_reason") not in CUT_FINISH_REASONS:
                return CallAsked.CALL
            replied = True
        elif row.kind == ItemKind.USER_MESSAGE:
            if data.get(CHECK_KEY) != CHECK_FAILED:
                return CallAsked.NOTHING
            if not replied:
                return CallAsked.CALL
            stands = data.get(CHECK_STANDS_KEY) and not changed
            return CallAsked.CHANGE if stands else CallAsked.NOTHING
    return CallAsked.NOTHING


def withheld_tools(rows: Sequence[ItemRow]) -> tuple[str, ...]:
    """The tools whose calls came to nothing new in the latest replies of ``rows`` that came
    to nothing else: a result marked unchanged (a repeated read, a write of what the file
    held), or the same failing call as an earlier one. The latest reply's come first: they
    are withheld first when not all can be."""
    # Where each failing call (FAILED_CALL_KEY) first failed.
    first_failed: dict[str, int] = {}
    for at, row in enumerate(rows):
        key = (row.data or {}).get(FAILED_CALL_KEY) if row.kind == ItemKind.TOOL_RESULT else None
        if isinstance(key, str):
            first_failed.setdefault(key, at)
    withheld: list[str] = []
    end = len(rows)  # the replies are walked back from the latest
    while True:
        start = end  # where this reply's items begin
        while start and rows[start - 1].kind not in (
            ItemKind.ASSISTANT_MESSAGE,
            ItemKind.USER_MESSAGE,
        ):
            start -= 1
        fresh = called = False
        for at in range(start, end):
            row, data = rows[at], rows[at].data or {}
            if row.kind != ItemKind.TOOL_RESULT:
                continue
            called = True
            key = data.get(FAILED_CALL_KEY)
            again = data.get("unchanged") or (
                isinstance(key, str) and first_failed.get(key, at) < start
            )
            if again and row.tool_name and row.tool_name not in withheld:
                withheld.append(row.tool_name)
            fresh = fresh or not again
        # A reply with a result that was not nothing new (a success, or a failure the model
        # had not met: something to act on) ends the run; so do one that called nothing (an
        # answer) and a user's message (a failed check, a nudge, a person's words). Through
        # a new failure, the 1.5B model, its repeated read withheld, made up artifact ids and
        # delegated the task, the file tool it needed withheld all the while.
        if fresh or not called or start < 1 or rows[start - 1].kind == ItemKind.USER_MESSAGE:
            return tuple(withheld)
        end = start - 1


def call_required(asked: CallAsked, registry: ToolRegistry, offered: Sequence[ToolSpec]) -> bool:
    """Whether the next reply must call one of ``offered`` (the turn's tools, as the agent's
    ``registry`` runs them)."""
    if asked is CallAsked.CHANGE:
        return any(_changes(registry.get(t.name)) for t in offered)
    return asked is CallAsked.CALL and bool(offered)


def _changes(tool: Tool | None) -> bool:
    return tool is not None and tool.effect == "effectful"
