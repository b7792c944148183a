"""Which turns ask the next reply for a tool call: a failed check (one that judged the
workspace alone, until a tool has changed it), and a call whose arguments were not JSON;
never a nudge, a user's message or a tool's own error."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable_agents.activities.context.assembly import SHOWN_RAW_CHARS, shown_arguments
from durable_agents.activities.context.call_expected import (
    CallAsked,
    call_asked,
    call_required,
    withheld_tools,
)
from durable_agents.activities.providers.base import ChatMessage, ModelRequest, ToolSpec
from durable_agents.activities.providers.errors import CUT_ARGUMENTS_KEY, RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.request_fingerprint import request_fingerprint
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.item_marks import (
    CHECK_FAILED,
    CHECK_KEY,
    CHECK_STANDS_KEY,
    FAILED_CALL_KEY,
    NUDGE_KEY,
    REPEATS_KEY,
)


def row(kind: str, **data: Any) -> ItemRow:
    return ItemRow(kind=kind, data=data)


TASK = row("user_message")
REPLY = row("assistant_message", finish_reason="tool_calls")
CUT_REPLY = row("assistant_message", finish_reason="length")
READ = row("tool_call", arguments={"path": "a.txt"})
CUT = row("tool_call", arguments={RAW_ARGUMENTS_KEY: '{"path": "a.t'})
RESULT = row("tool_result")
FAILED = row("tool_result", error_type="PathOutsideWorkspace")
WROTE = row("tool_result", effect="completed")
WROTE_BEFORE = row("tool_result", effect="reconciled")
WRITE_FAILED = row("tool_result", effect="failed", error_type="InvalidArguments")
WROTE_THE_SAME = row("tool_result", effect="completed", unchanged=True)
CHECK = row("user_message", **{CHECK_KEY: CHECK_FAILED, "reason": "the answer lacks a word"})
STANDS = row(
    "user_message", **{CHECK_KEY: CHECK_FAILED, "reason": "no out/r.md", CHECK_STANDS_KEY: True}
)
NUDGE = row("user_message", **{NUDGE_KEY: "empty"})
APPROVAL = row("approval")
NOTHING, CALL, CHANGE = CallAsked.NOTHING, CallAsked.CALL, CallAsked.CHANGE


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], NOTHING),
        ([TASK], NOTHING),
        ([TASK, REPLY, READ, RESULT], NOTHING),
        ([TASK, REPLY, READ, FAILED], NOTHING),  # a refusal may be the answer
        ([TASK, REPLY, CUT, RESULT], CALL),
        ([TASK, REPLY, READ, CUT, RESULT, RESULT], CALL),
        ([TASK, REPLY, CUT, APPROVAL, RESULT], CALL),
        ([TASK, REPLY, CUT, RESULT, REPLY, READ, RESULT], NOTHING),  # it called again
        ([TASK, CUT_REPLY, CUT, RESULT], NOTHING),  # cut at its limit: not forced again
        ([TASK, REPLY, STANDS, CUT_REPLY, CUT, RESULT], CHANGE),
        ([TASK, REPLY, CHECK], CALL),
        ([TASK, REPLY, CHECK, REPLY, READ, RESULT], NOTHING),  # it called
        ([TASK, REPLY, CHECK, REPLY, NUDGE], NOTHING),
        ([TASK, REPLY, CHECK, REPLY], NOTHING),  # answered: the loop checks that answer
        ([TASK, REPLY, CHECK, row("user_message")], NOTHING),  # the user's own message
        # A check on the workspace alone stands until a tool changed the workspace.
        ([TASK, REPLY, STANDS], CALL),
        ([TASK, REPLY, STANDS, REPLY, READ, RESULT, REPLY, READ, RESULT], CHANGE),
        ([TASK, REPLY, STANDS, REPLY, READ, WRITE_FAILED], CHANGE),
        ([TASK, REPLY, STANDS, REPLY, READ, WROTE], NOTHING),
        ([TASK, REPLY, STANDS, REPLY, READ, WROTE_THE_SAME], CHANGE),  # nothing changed
        ([TASK, REPLY, STANDS, REPLY, READ, WROTE_BEFORE, REPLY, READ, RESULT], NOTHING),
        ([TASK, REPLY, STANDS, REPLY, CUT, RESULT], CALL),
        ([TASK, REPLY, STANDS, REPLY, NUDGE], NOTHING),
        # A change before the check failed does not count.
        ([TASK, REPLY, READ, WROTE, REPLY, STANDS, REPLY, READ, RESULT], CHANGE),
    ],
)
def test_which_turns_ask_for_a_call(rows: list[ItemRow], expected: CallAsked) -> None:
    assert call_asked(rows) is expected


def test_a_change_is_required_only_of_an_agent_that_can_make_one() -> None:
    builtin = ToolRegistry.of(builtin_tools())
    offered = [builtin.tools[name].spec for name in ("list_dir", "read_file")]
    writes = [*offered, builtin.tools["write_file"].spec]
    assert call_required(CHANGE, builtin, writes)
    assert not call_required(CHANGE, builtin, offered)  # read-only tools: it may answer
    assert call_required(CALL, builtin, offered)
    assert not call_required(CALL, builtin, [])
    assert not call_required(NOTHING, builtin, writes)


def test_a_request_that_requires_a_call_has_its_own_fingerprint_and_no_other_changes() -> None:
    base = ModelRequest(
        model="m",
        messages=[ChatMessage("user", "Read a.txt.")],
        tools=[ToolSpec("read_file", "Read.", {"type": "object"})],
        idempotency_key="s:1:model",
    )
    # The fingerprint of a request that requires nothing is as it was made before.
    assert request_fingerprint(base) == "Pmswg9cJV9Hbwj1NqAut5A"
    assert request_fingerprint(replace(base, call_required=True)) != request_fingerprint(base)
    no_tools = replace(base, tools=[])
    assert request_fingerprint(replace(no_tools, call_required=True)) == request_fingerprint(
        no_tools
    )


def test_a_tool_whose_call_came_to_nothing_new_is_withheld_until_a_reply_brings_something() -> None:
    def result(tool: str, **data: Any) -> ItemRow:
        return ItemRow(kind="tool_result", tool_name=tool, data=data)

    listed = result("list_dir")
    # A repeat of a recent call is a note marked unchanged (activities/repeated_calls.py).
    relisted = result("list_dir", unchanged=True, **{REPEATS_KEY: "ab" * 32})
    reread = result("read_file", unchanged=True, **{REPEATS_KEY: "cd" * 32})
    wrote_the_same = result("write_file", effect="completed", unchanged=True)
    missing = result("read_file", error_type="FileNotFound", **{FAILED_CALL_KEY: "f1"})
    other_missing = result("read_file", error_type="FileNotFound", **{FAILED_CALL_KEY: "f2"})
    assert withheld_tools([TASK, REPLY, READ, listed, REPLY, READ, relisted]) == ("list_dir",)
    assert withheld_tools([TASK, REPLY, READ, READ, reread, relisted, reread]) == (
        "read_file",
        "list_dir",
    )
    assert withheld_tools([TASK, REPLY, READ, wrote_the_same]) == ("write_file",)
    # The same failing call as an earlier one; a first failure is the model's to act on.
    assert withheld_tools([TASK, REPLY, READ, missing]) == ()
    assert withheld_tools([TASK, REPLY, READ, missing, REPLY, READ, other_missing]) == ()
    assert withheld_tools([TASK, REPLY, READ, missing, REPLY, READ, missing]) == ("read_file",)
    # Every reply of a run that came to nothing new: the 0.5B model went round two tools that
    # each came to nothing new when only the latest reply's were withheld.
    assert withheld_tools([TASK, REPLY, READ, reread, REPLY, READ, relisted]) == (
        "list_dir",
        "read_file",
    )
    # A new failure is something to act on: it ends the run.
    assert withheld_tools([TASK, REPLY, READ, relisted, REPLY, READ, other_missing]) == ()
    rerun = [TASK, REPLY, READ, relisted, REPLY, READ, missing, REPLY, READ, missing]
    assert withheld_tools(rerun) == ("read_file",)
    assert withheld_tools(
        [TASK, REPLY, READ, listed, REPLY, READ, reread, REPLY, READ, missing, REPLY, READ, missing]
    ) == ("read_file",)
    assert withheld_tools([TASK, REPLY, READ, reread, REPLY, READ, READ, listed, relisted]) == (
        "list_dir",
    )
    # A reply that made progress, an answer or a turn after it lifts it.
    assert withheld_tools([TASK, REPLY, READ, relisted, REPLY, READ, listed]) == ()
    assert withheld_tools([TASK, REPLY, READ, relisted, NUDGE]) == ()
    assert withheld_tools([TASK, REPLY, READ, relisted, REPLY]) == ()
    assert withheld_tools([TASK, REPLY, READ, reread, REPLY, CHECK, REPLY, READ, relisted]) == (
        "list_dir",
    )
    assert withheld_tools([TASK, REPLY, READ, reread, REPLY, REPLY, READ, relisted]) == (
        "list_dir",
    )
    assert withheld_tools([TASK, REPLY, READ, listed]) == ()
    base = ModelRequest("m", [ChatMessage("user", "Read.")], [ToolSpec("read_file", "", {})], "k")
    assert request_fingerprint(replace(base, withheld=("read_file",))) != request_fingerprint(base)


def test_raw_arguments_are_shown_again_whole_when_short_else_empty() -> None:
    short = {RAW_ARGUMENTS_KEY: '{"path": "a.t'}
    assert shown_arguments(short) == short
    runaway = {RAW_ARGUMENTS_KEY: "- a line\\n" * SHOWN_RAW_CHARS, CUT_ARGUMENTS_KEY: True}
    assert shown_arguments(runaway) == {RAW_ARGUMENTS_KEY: "", CUT_ARGUMENTS_KEY: True}
    assert shown_arguments({"path": "x" * 1000}) == {"path": "x" * 1000}
