"""Which turns ask the next reply for a tool call: a failed check, and a call whose
arguments were not JSON; never a nudge, a user's message or a tool's own error."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable_agents.activities.context.call_expected import call_expected
from durable_agents.activities.providers.base import ChatMessage, ModelRequest, ToolSpec
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.request_fingerprint import request_fingerprint
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.item_marks import CHECK_FAILED, CHECK_KEY, NUDGE_KEY


def row(kind: str, **data: Any) -> ItemRow:
    return ItemRow(kind=kind, data=data)


TASK = row("user_message")
REPLY = row("assistant_message")
READ = row("tool_call", arguments={"path": "a.txt"})
CUT = row("tool_call", arguments={RAW_ARGUMENTS_KEY: '{"path": "a.t'})
RESULT = row("tool_result")
FAILED = row("tool_result", error_type="PathOutsideWorkspace")
CHECK = row("user_message", **{CHECK_KEY: CHECK_FAILED, "reason": "out/r.md was not written"})
NUDGE = row("user_message", **{NUDGE_KEY: "empty"})
APPROVAL = row("approval")


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], False),
        ([TASK], False),
        ([TASK, REPLY, READ, RESULT], False),
        ([TASK, REPLY, READ, FAILED], False),  # a refusal may be the answer
        ([TASK, REPLY, CUT, RESULT], True),
        ([TASK, REPLY, READ, CUT, RESULT, RESULT], True),
        ([TASK, REPLY, CUT, APPROVAL, RESULT], True),
        ([TASK, REPLY, CUT, RESULT, REPLY, READ, RESULT], False),  # it called again
        ([TASK, REPLY, CHECK], True),
        ([TASK, REPLY, CHECK, REPLY, READ, RESULT], False),  # it called
        ([TASK, REPLY, CHECK, REPLY, NUDGE], False),
        ([TASK, REPLY, CHECK, REPLY], False),  # answered: the loop checks that answer
        ([TASK, REPLY, CHECK, row("user_message")], False),  # the user's own message
    ],
)
def test_which_turns_ask_for_a_call(rows: list[ItemRow], expected: bool) -> None:
    assert call_expected(rows) is expected


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
