"""Pooled connections are pinged on checkout only after sitting idle (storage/pool_ping.py):
a stale idle connection is replaced unseen; a just-used one is not pinged, and if its server
side died meanwhile, one statement fails and the pool recovers by itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from durable_agents.storage.db import make_engine
from durable_agents.workers.stack import StackEndpoints


def _url(migrated: StackEndpoints) -> str:
    s = migrated.settings(workspace=Path("unused"), task_queue="unused", provider="scripted")
    return s.database.url.get_secret_value()


@pytest.fixture
async def killer(migrated: StackEndpoints) -> AsyncIterator[AsyncEngine]:
    """A second engine of the same role, to end the first one's server process."""
    engine = make_engine(_url(migrated), pool_size=1)
    yield engine
    await engine.dispose()


async def _pooled_pid(engine: AsyncEngine) -> int:
    """Use the pool's one connection and return it to the pool; its server pid."""
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(killer: AsyncEngine, pid: int) -> None:
    async with killer.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        # Wait until the process is gone, so the pooled connection is really dead; a
        # backend that outlives 30 s fails the test here rather than stalling the suite.
        # pg_stat_activity is read once per transaction: the loop clears that snapshot.
        await conn.execute(
            text(
                "DO $$ BEGIN FOR i IN 1..3000 LOOP PERFORM pg_stat_clear_snapshot(); "
                "EXIT WHEN NOT EXISTS (SELECT 1 FROM "
                f"pg_stat_activity WHERE pid = {int(pid)}); PERFORM pg_sleep(0.01); END LOOP; "
                "PERFORM pg_stat_clear_snapshot(); "
                f"IF EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = {int(pid)}) THEN "
                "RAISE EXCEPTION 'backend % still there 30 s after pg_terminate_backend', "
                f"{int(pid)}; END IF; END $$"
            )
        )


async def test_an_idle_connection_whose_server_died_is_replaced_on_checkout(
    migrated: StackEndpoints, killer: AsyncEngine
) -> None:
    engine = make_engine(_url(migrated), pool_size=1, ping_after_idle_s=0)
    try:
        pid = await _pooled_pid(engine)
        await _terminate(killer, pid)
        # The ping finds the dead connection; the caller never sees it.
        assert await _pooled_pid(engine) != pid
    finally:
        await engine.dispose()


async def test_a_just_used_connection_is_not_pinged_and_the_pool_recovers_after_one_failure(
    migrated: StackEndpoints, killer: AsyncEngine
) -> None:
    engine = make_engine(_url(migrated), pool_size=1, ping_after_idle_s=3600)
    try:
        pid = await _pooled_pid(engine)
        await _terminate(killer, pid)
        # Not pinged (it was used moments ago): its first statement meets the dead socket.
        with pytest.raises(DBAPIError) as failed:
            await _pooled_pid(engine)
        assert failed.value.connection_invalidated
        # The disconnect invalidated the pool: the next checkout connects afresh.
        assert await _pooled_pid(engine) != pid
    finally:
        await engine.dispose()
