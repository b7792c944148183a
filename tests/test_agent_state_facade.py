"""AgentState as one facade (storage/agent_state.py) on the real PostgreSQL: the tenant and the
unit of work are bound once, a write block commits or rolls back as one, and the call read
model gives the arguments a call runs with."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.items import NewItem
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources


class _Boom(Exception):
    pass


def _item(
    sid: uuid.UUID,
    kind: str,
    key: str,
    *,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    data: dict[str, Any] | None = None,
) -> NewItem:
    return NewItem(
        session_id=sid,
        kind=kind,
        role="user",
        idempotency_key=key,
        text=kind,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        data=data or {},
    )


async def _count(sessions: async_sessionmaker[AsyncSession], tenant: str, sid: uuid.UUID) -> int:
    async with agent_state(sessions, tenant) as st:
        return len(await st.items.page(sid))


async def test_a_write_block_commits_every_repository_together_or_nothing(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    with pytest.raises(_Boom):
        async with agent_state(resources.sessions, tenant, write=True) as st:
            await st.sessions.create(sid, title="t", model_config={})
            await st.items.append(_item(sid, ItemKind.USER_MESSAGE, f"{sid}:task"))
            raise _Boom
    async with agent_state(resources.sessions, tenant) as st:
        with pytest.raises(SessionNotFound):
            await st.sessions.get(sid)
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.sessions.create(sid, title="t", model_config={})
        await st.items.append(_item(sid, ItemKind.USER_MESSAGE, f"{sid}:task"))
    assert await _count(resources.sessions, tenant, sid) == 1


async def test_the_tenant_is_bound_once_for_every_repository(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.sessions.create(sid, title="t", model_config={})
    other = f"{tenant}-other"
    async with agent_state(resources.sessions, other) as st:
        with pytest.raises(SessionNotFound):
            await st.sessions.get(sid)
        assert await st.items.page(sid) == []
        assert await st.calls.effective(sid, "call-1") is None


async def test_a_calls_effective_arguments_are_the_approvers_last_edit(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.sessions.create(sid, title="t", model_config={})
        call = _item(
            sid,
            ItemKind.TOOL_CALL,
            f"{sid}:call",
            tool_call_id="c1",
            tool_name="write_file",
            data={"arguments": {"path": "a.txt"}},
        )
        await st.items.append(call)
    async with agent_state(resources.sessions, tenant, autocommit=True) as st:
        asked = await st.calls.effective(sid, "c1")
    assert asked is not None and (asked.tool_name, asked.arguments, asked.edited) == (
        "write_file",
        {"path": "a.txt"},
        False,
    )
    async with agent_state(resources.sessions, tenant, write=True) as st:
        for n, path in enumerate(("b.txt", "c.txt")):
            edit = _item(
                sid,
                ItemKind.APPROVAL,
                f"{sid}:edit{n}",
                tool_call_id="c1",
                data={"decision": "approve", "arguments": {"path": path}},
            )
            await st.items.append(edit)
    async with agent_state(resources.sessions, tenant) as st:
        edited = await st.calls.effective(sid, "c1")
        thread = await st.calls.thread(sid, "c1")
    assert edited is not None and edited.arguments == {"path": "c.txt"} and edited.edited
    assert thread is not None and len(thread.others) == 2


async def test_a_unit_is_one_kind(resources: Resources, tenant: str) -> None:
    with pytest.raises(ValueError, match="not both"):
        async with agent_state(resources.sessions, tenant, write=True, autocommit=True):
            pass
