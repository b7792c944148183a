"""The tool_call item of a call is one lookup: the item itself, or with the items of the
same call after it, within the caller's tenant."""

from __future__ import annotations

import uuid
from typing import Any

from storage.items import ItemRepository, NewItem
from storage.sessions import SessionRepository
from workers.resources import Resources


async def session_with_calls(res: Resources, tenant: str, calls: dict[str, Any]) -> uuid.UUID:
    """A session whose model asked for `calls` (call id -> (tool name, arguments))."""
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        items = ItemRepository(db, tenant)
        for call_id, (name, arguments) in calls.items():
            await items.append(
                NewItem(
                    sid,
                    "tool_call",
                    "assistant",
                    f"{sid}:0:call:{call_id}",
                    text=name,
                    tool_call_id=call_id,
                    tool_name=name,
                    data={"arguments": arguments, "step": 0},
                )
            )
    return sid


async def test_the_tool_call_lookup_finds_the_calls_own_item_within_its_tenant(
    resources: Resources, tenant: str
) -> None:
    sid = await session_with_calls(resources, tenant, {"c1": ("echo", {"text": "x"})})
    async with resources.sessions() as db, db.begin():
        items = ItemRepository(db, tenant)
        # Items of the same call after it: a decision, then the result.
        for kind, role in (("approval", "user"), ("tool_result", "tool")):
            await items.append(NewItem(sid, kind, role, f"{sid}:{kind}", tool_call_id="c1"))
    async with resources.sessions() as db:
        items = ItemRepository(db, tenant)
        call = await items.tool_call(sid, "c1")
        thread = await items.call_thread(sid, "c1")
        assert call is not None and call.kind == "tool_call" and call.tool_name == "echo"
        assert thread is not None and thread.call.id == call.id
        assert [r.kind for r in thread.others] == ["approval", "tool_result"]
        assert await items.tool_call(sid, "c2") is None
        assert await items.call_thread(sid, "c2") is None
        other = ItemRepository(db, f"{tenant}-b")
        assert await other.tool_call(sid, "c1") is None
        assert await other.call_thread(sid, "c1") is None
