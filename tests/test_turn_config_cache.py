"""A worker records each agent's current context config once (activities.context.model_context.
ConfigCache), and never remembers a config id whose recording was rolled back."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import event

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context.model_context import ConfigCache, config_of, turn_config
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.db import autocommit
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.turns import TurnRepository
from durable_agents.workers.resources import Resources


class _Boom(Exception):
    pass


async def _session_with_turn(res: Resources, tenant: str) -> uuid.UUID:
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        await ItemRepository(db, tenant).append(
            NewItem(sid, "user_message", "user", f"{sid}:task", text="do it")
        )
    return sid


async def test_an_agents_config_is_recorded_once_and_each_turn_names_it(
    resources: Resources, tenant: str
) -> None:
    res = resources
    current = config_of("scripted", "m", f"prompt {uuid.uuid4()}", [], ContextBudget())
    cache = ConfigCache()
    inserts: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO CONTEXT_"):
            inserts.append(statement)

    engine = res.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        ids = []
        for _ in range(3):
            sid = await _session_with_turn(res, tenant)
            async with autocommit(res.sessions) as db:
                config_id, config = await turn_config(AgentState(db, tenant), sid, current, cache)
            async with res.sessions() as db:
                turn = await TurnRepository(db, tenant).latest(sid)
            assert turn is not None and turn.context_config_id == config_id
            assert config.system_prompt == current.system_prompt
            ids.append(config_id)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(set(ids)) == 1
    assert len(inserts) == 3  # two blobs and the config row, for the first turn only


async def test_a_config_recorded_in_a_rolled_back_unit_is_recorded_again(
    resources: Resources, tenant: str
) -> None:
    res = resources
    current = config_of("scripted", "m", f"prompt {uuid.uuid4()}", [], ContextBudget())
    cache = ConfigCache()
    first = await _session_with_turn(res, tenant)
    with pytest.raises(_Boom):
        async with res.sessions() as db, db.begin():
            await turn_config(AgentState(db, tenant), first, current, cache)
            raise _Boom  # the config rows go with the transaction
    second = await _session_with_turn(res, tenant)
    async with res.sessions() as db, db.begin():
        # A remembered id of the rolled-back row would break the turn's foreign key here.
        config_id, _ = await turn_config(AgentState(db, tenant), second, current, cache)
    async with res.sessions() as db:
        turn = await TurnRepository(db, tenant).latest(second)
    assert turn is not None and turn.context_config_id == config_id
