"""What the model reads of a device call still pending, and of its late result: the note
is in our words and sits where the call's result goes, and the late result (committed after
later steps) replaces it there, so every assistant tool call is still followed by its tool
message, as providers require."""

from __future__ import annotations

import uuid
from typing import Any

from durable_agents.activities.context.assembly import ContextBudget, assemble_context, pending_note
from durable_agents.activities.providers.base import ChatMessage
from durable_agents.storage.models import ItemRow

SESSION = uuid.uuid4()


def _row(rows: list[ItemRow], kind: str, text: str = "", **kw: Any) -> None:
    rows.append(
        ItemRow(
            id=uuid.uuid4(),
            tenant_id="t",
            session_id=SESSION,
            ordinal=len(rows) + 1,
            kind=kind,
            role="x",
            text=text,
            idempotency_key=str(uuid.uuid4()),
            tool_call_id=kw.get("call"),
            tool_name=kw.get("name"),
            data=kw.get("data", {}),
            artifact_id=None,
        )
    )


def _step(rows: list[ItemRow], *calls: tuple[str, str]) -> None:
    listed = [{"id": cid, "name": name} for cid, name in calls]
    _row(rows, "assistant_message", data={"tool_calls": listed})
    for cid, name in calls:
        _row(rows, "tool_call", call=cid, name=name, data={"arguments": {}})


async def _messages(rows: list[ItemRow], pending: dict[str, str]) -> list[ChatMessage]:
    async def no_fetch(artifact_id: uuid.UUID, max_bytes: int) -> tuple[bytes, str]:
        raise AssertionError("nothing here is an artifact")

    ctx = await assemble_context(
        rows,
        system_prompt="be brief",
        tools=[],
        budget=ContextBudget(),
        fetch=no_fetch,
        pending=pending,
    )
    return ctx.messages[1:]


def _shape(messages: list[ChatMessage]) -> list[str]:
    return [
        m.role
        + (":" + ",".join(c.id for c in m.tool_calls) if m.tool_calls else "")
        + (f"->{m.tool_call_id}" if m.tool_call_id else "")
        for m in messages
    ]


async def test_a_pending_device_call_reads_as_our_note_and_its_late_result_takes_its_place() -> (
    None
):
    rows: list[ItemRow] = []
    _row(rows, "user_message", "read my notes")
    _step(rows, ("dev", "read_file"), ("cloud", "list_files"))
    _row(rows, "tool_result", "a.txt", call="cloud", name="list_files")
    _step(rows, ("later", "list_files"))
    _row(rows, "tool_result", "b.txt", call="later", name="list_files")
    note = pending_note("laptop", 0)
    expected = [
        "user",
        "assistant:dev,cloud",
        "tool->dev",
        "tool->cloud",
        "assistant:later",
        "tool->later",
    ]

    messages = await _messages(rows, {"dev": note})
    assert _shape(messages) == expected
    assert messages[2].content == note
    assert note.startswith("[pending on device laptop since step 0;")

    # The device's result commits after the later step: it is given with its call, and
    # nothing appears at its commit position.
    _row(rows, "tool_result", "the notes", call="dev", name="read_file")
    messages = await _messages(rows, {"dev": note})  # still listed: the result wins
    assert _shape(messages) == expected
    assert messages[2].content == "the notes"
