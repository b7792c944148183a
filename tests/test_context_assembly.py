"""Transient expansion: refs become content in a copy, within a real token budget."""

from __future__ import annotations

import re
import uuid
from typing import Any

from durable_agents.activities.context.assembly import ContextBudget, assemble_context
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.tokens import count_tokens

SESSION = uuid.uuid4()


class _Items:
    def __init__(self) -> None:
        self.rows: list[ItemRow] = []
        self.blobs: dict[uuid.UUID, bytes] = {}
        self.reads: list[int] = []

    def add(self, kind: str, text: str = "", **kw: Any) -> ItemRow:
        row = ItemRow(
            id=uuid.uuid4(),
            tenant_id="t",
            session_id=SESSION,
            ordinal=len(self.rows) + 1,
            kind=kind,
            role="x",
            text=text,
            idempotency_key=str(uuid.uuid4()),
            tool_call_id=kw.get("call"),
            tool_name=kw.get("name"),
            data=kw.get("data", {}),
            artifact_id=None,
        )
        self.rows.append(row)
        return row

    def step(self, call: str, content: bytes) -> None:
        self.add("assistant_message", "", data={"tool_calls": [{"id": call, "name": "read_file"}]})
        self.add("tool_call", call=call, name="read_file", data={"arguments": {"path": call}})
        result = self.add(
            "tool_result",
            content[:100].decode(),
            call=call,
            name="read_file",
            data={"artifact": {"sha256": "f" * 64, "size_bytes": len(content)}},
        )
        result.artifact_id = uuid.uuid4()
        self.blobs[result.artifact_id] = content

    async def fetch(self, artifact_id: uuid.UUID, max_bytes: int) -> tuple[bytes, str]:
        self.reads.append(min(len(self.blobs[artifact_id]), max_bytes))
        return self.blobs[artifact_id][:max_bytes], "text/plain; charset=utf-8"


async def _assemble(items: _Items, **budget: int) -> Any:
    return await assemble_context(
        items.rows,
        system_prompt="be brief",
        tools=[],
        budget=ContextBudget(**budget),
        fetch=items.fetch,
    )


async def test_small_results_are_expanded_in_full_and_rows_stay_previews() -> None:
    items = _Items()
    items.add("user_message", "summarise")
    body = b"line of text\n" * 50
    items.step("c1", body)
    before = [r.text for r in items.rows]
    ctx = await _assemble(items)
    tool = next(m for m in ctx.messages if m.role == "tool")
    assert tool.content == body.decode()
    assert ctx.expanded == 1 and ctx.truncated == 0
    assert [r.text for r in items.rows] == before  # nothing written back into the rows


async def test_large_result_is_cut_to_its_token_allowance_and_says_where_the_rest_is() -> None:
    items = _Items()
    items.add("user_message", "summarise")
    items.step("c1", ("word " * 50_000).encode())
    ctx = await _assemble(items, tool_result_tokens=1_000)
    tool = next(m for m in ctx.messages if m.role == "tool")
    assert 950 <= count_tokens(tool.content) <= 1_000  # nearly all of the allowance is used
    excerpt, note = tool.content.split("\n[truncated: ")
    assert ("word " * 50_000).startswith(excerpt)
    # The total is estimated from a sample of the prefix (50,000 one-token words).
    total = int(re.search(r"of ~(\d+) tokens", note).group(1))  # type: ignore[union-attr]
    assert 45_000 <= total <= 55_000
    assert "f" * 64 in note
    assert ctx.truncated == 1
    # Only a prefix sized to the allowance was read, not the 250 KB result.
    assert items.reads == [16_000]


async def test_budget_goes_to_the_newest_results_first() -> None:
    items = _Items()
    items.add("user_message", "summarise")
    for n in range(4):
        items.step(f"c{n}", (f"result {n} " * 2_000).encode())
    ctx = await _assemble(
        items, context_tokens=12_000, reply_tokens=1_000, tool_result_tokens=5_000
    )
    tools = {m.tool_call_id: m.content for m in ctx.messages if m.role == "tool"}
    assert "[not expanded" in tools["c0"]
    assert "[not expanded" not in tools["c3"] and tools["c3"].startswith("result 3")
    assert ctx.input_tokens + 1_000 <= 12_000


async def test_over_budget_history_drops_oldest_steps_but_keeps_the_task() -> None:
    items = _Items()
    items.add("user_message", "the original task")
    for n in range(30):
        items.add("user_message", f"follow-up {n} " + "x " * 300)
    ctx = await _assemble(items, context_tokens=4_000, reply_tokens=500)
    users = [m.content for m in ctx.messages if m.role == "user"]
    assert users[0] == "the original task"
    assert users[-1].startswith("follow-up 29")
    assert ctx.dropped_messages > 0 and ctx.input_tokens + 500 <= 4_000


async def test_user_message_between_call_and_result_does_not_separate_them() -> None:
    items = _Items()
    items.add("user_message", "task")
    items.add("assistant_message", "", data={"tool_calls": [{"id": "c1", "name": "read_file"}]})
    items.add("tool_call", call="c1", name="read_file", data={"arguments": {}})
    items.add("user_message", "meanwhile")
    items.add("tool_result", "ok", call="c1", name="read_file")
    roles = [m.role for m in (await _assemble(items)).messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]


async def test_the_task_and_the_newest_message_are_kept_even_when_they_alone_overflow() -> None:
    items = _Items()
    items.add("user_message", "the original task")
    for n in range(5):
        items.add("user_message", f"follow-up {n}")
    items.add("user_message", "newest " + "word " * 6_000)
    ctx = await _assemble(items, context_tokens=4_000, reply_tokens=500)
    assert [m.role for m in ctx.messages] == ["system", "user", "user"]
    task, newest = (m.content for m in ctx.messages[1:])
    assert ctx.messages[0].content == "be brief" and task == "the original task"
    # The newest is cut in the copy to what fits, saying so; the others went first.
    assert newest.startswith("newest word") and "[cut to fit the context budget" in newest
    assert ctx.dropped_messages == 5 and ctx.input_tokens + 500 <= 4_000


async def test_a_message_stored_as_an_artifact_is_expanded_like_a_tool_result() -> None:
    items = _Items()
    items.add("user_message", "the original task")
    body = ("long message " * 20_000).encode()
    sha = "e" * 64
    message = items.add(
        "user_message",
        body[:100].decode(),
        data={"artifact": {"sha256": sha, "size_bytes": len(body)}},
    )
    message.artifact_id = uuid.uuid4()
    items.blobs[message.artifact_id] = body
    ctx = await _assemble(items, tool_result_tokens=2_000)
    users = [m.content for m in ctx.messages if m.role == "user"]
    assert users[0] == "the original task"
    excerpt, note = users[1].split("\n[truncated: ")
    assert body.decode().startswith(excerpt) and count_tokens(users[1]) <= 2_000
    assert f"full message: artifact sha256:{sha}" in note
    assert ctx.truncated == 1 and message.text == body[:100].decode()


async def test_provider_is_shown_its_own_call_ids_where_unambiguous_ours_elsewhere() -> None:
    items = _Items()
    items.add("user_message", "task")

    def step(ours: str, data: dict[str, Any]) -> None:
        items.add("assistant_message", "", data={"tool_calls": [{"id": ours, "name": "f"}]})
        items.add("tool_call", call=ours, name="f", data={"arguments": {}, **data})
        items.add("tool_result", f"result of {ours}", call=ours, name="f")

    step("toolu_old", {})  # written before our ids: its id was the provider's
    step("call_1_0", {"provider_call_id": "call_0"})
    step("call_2_0", {"provider_call_id": "call_0"})  # reused: ambiguous, ours stands in
    step("call_3_0", {"provider_call_id": None})  # the provider sent none
    step("call_4_0", {"provider_call_id": "call_5_0"})  # shaped like a later one of ours
    step("call_5_0", {"provider_call_id": ""})
    messages = (await _assemble(items)).messages
    asked = [c.id for m in messages for c in m.tool_calls]
    assert asked == ["toolu_old", "call_0", "call_2_0", "call_3_0", "call_5_0", "call_5_0_1"]
    told = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert list(told) == asked
    assert told["call_0"] == "result of call_1_0" and told["call_5_0_1"] == "result of call_5_0"
