"""storage.db.autocommit: statements commit one by one with no transaction held open, and
the pooled connection goes back to transactional units of work afterwards."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from durable_agents.storage.db import autocommit, make_engine, make_session_factory
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints


class _Boom(Exception):
    pass


async def test_autocommit_commits_each_statement_and_leaves_the_pool_transactional(
    migrated: StackEndpoints, resources: Resources, tenant: str
) -> None:
    s = migrated.settings(workspace=Path("unused"), task_queue="unused", provider="scripted")
    # One pooled connection: the transactional unit below reuses the autocommit one.
    engine = make_engine(s.database.url.get_secret_value(), pool_size=1)
    sessions = make_session_factory(engine)
    sid = uuid.uuid4()

    async def seen_elsewhere() -> str:
        async with resources.sessions() as other:
            return (await SessionRepository(other, tenant).get(sid)).status

    try:
        async with autocommit(sessions) as db:
            repo = SessionRepository(db, tenant)
            await repo.create(sid, title="t", model_config={})
            await repo.set_status(sid, "running")
            # Committed already, before the block ends: no transaction is open.
            assert await seen_elsewhere() == "running"
        with pytest.raises(_Boom):
            async with sessions() as db, db.begin():
                await SessionRepository(db, tenant).set_status(sid, "completed")
                raise _Boom
        # Rolled back: the same pooled connection runs transactions again.
        assert await seen_elsewhere() == "running"
    finally:
        await engine.dispose()
