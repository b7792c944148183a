"""AgentState hash-partitioned by tenant_id (storage/partitioning.py) in a scratch database
of the test stack: the migrated schema converts (every key includes the tenant), still
matches the models, and the repositories work on it. `make test-partitioned` runs the
storage tests on such a schema; this keeps the conversion from rotting in the normal suite."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from durable_agents.storage.db import make_engine, make_session_factory, migrate
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.partitioning import PARTITION_SCHEMA_PREFIX, partition_by_tenant
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.stack import DevStack
from tests.support.schema_diff import model_differences


async def _scratch(devstack: DevStack, prefix: str) -> tuple[str, str, str]:
    """(name, app url, owner url) of a new empty database with the stack's two roles."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    app_url = devstack.postgres.create_database(name)
    return name, app_url, devstack.postgres.url_for(name, role=devstack.postgres.owner)


@pytest.fixture(scope="module")
async def partitioned(devstack: DevStack) -> AsyncIterator[tuple[AsyncEngine, list[str]]]:
    name, app_url, owner_url = await _scratch(devstack, "partitioned")
    await migrate(owner_url)
    tables = await partition_by_tenant(owner_url, partitions=4)
    engine = make_engine(app_url)  # as the workers' role: the grants came along
    try:
        yield engine, tables
    finally:
        await engine.dispose()
        devstack.postgres.psql(f'DROP DATABASE "{name}" WITH (FORCE)')


async def test_every_tenant_table_is_hash_partitioned_and_still_matches_the_models(
    partitioned: tuple[AsyncEngine, list[str]],
) -> None:
    engine, tables = partitioned
    assert {"sessions", "items", "turns", "compactions", "memories", "context_configs"} <= set(
        tables
    )
    async with engine.connect() as conn:
        parts: dict[str, int] = dict(
            (
                await conn.execute(
                    text(
                        "SELECT p.partrelid::regclass::text, count(i.inhrelid) "
                        "FROM pg_partitioned_table p JOIN pg_inherits i "
                        "ON i.inhparent = p.partrelid WHERE p.partstrat = 'h' GROUP BY 1"
                    )
                )
            ).all()
        )
        differences = await conn.run_sync(model_differences)
    assert parts == {t: 4 for t in tables}
    assert differences == []


async def test_repositories_append_once_per_tenant_key_on_the_partitioned_schema(
    partitioned: tuple[AsyncEngine, list[str]],
) -> None:
    engine, _ = partitioned
    sessions = make_session_factory(engine)
    key = f"k-{uuid.uuid4()}"
    rows = []
    for tenant in ("t-a", "t-b"):
        sid = uuid.uuid4()
        for _ in range(2):  # a retried append finds the first
            async with sessions() as db, db.begin():
                await SessionRepository(db, tenant).create(sid, title="t", model_config={})
                item = NewItem(sid, "user_message", "user", key, text="hi")
                row, created = await ItemRepository(db, tenant).append(item)
                rows.append((row.tenant_id, row.ordinal, created))
    assert rows == [("t-a", 1, True), ("t-a", 1, False), ("t-b", 1, True), ("t-b", 1, False)]
    async with sessions() as db:
        with pytest.raises(SessionNotFound):
            await SessionRepository(db, "t-c").get(sid)
    await _refuses_an_item_of_a_missing_session(sessions)


async def _refuses_an_item_of_a_missing_session(sessions: async_sessionmaker[Any]) -> None:
    """The tenant-leading foreign keys hold across partitions."""
    async with sessions() as db:
        with pytest.raises(DBAPIError, match="fk_items_session"):
            await db.execute(
                text(
                    "INSERT INTO items (id, tenant_id, session_id, ordinal, kind, role, "
                    "idempotency_key) VALUES (:i, 't-a', :s, 1, 'user_message', 'user', 'x')"
                ),
                {"i": uuid.uuid4(), "s": uuid.uuid4()},
            )


async def test_a_unique_key_without_the_tenant_cannot_be_partitioned(devstack: DevStack) -> None:
    name, _, owner_url = await _scratch(devstack, "unpartitionable")
    engine = make_engine(owner_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("CREATE TABLE notes (id uuid PRIMARY KEY, tenant_id text NOT NULL)")
            )
        with pytest.raises(DBAPIError, match="partition"):
            await partition_by_tenant(owner_url)
        async with engine.connect() as conn:  # nothing was changed
            kind = await conn.scalar(
                text("SELECT relkind::text FROM pg_class WHERE relname = 'notes'")
            )
            schema = await conn.scalar(
                text("SELECT 1 FROM pg_namespace WHERE nspname LIKE :n"),
                {"n": f"{PARTITION_SCHEMA_PREFIX}%"},
            )
        assert (kind, schema) == ("r", None)
    finally:
        await engine.dispose()
        devstack.postgres.psql(f'DROP DATABASE "{name}" WITH (FORCE)')
