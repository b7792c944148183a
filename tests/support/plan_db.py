"""A database of its own for the tests whose subject is the planner's choice.

The suite's shared database holds the rows of every test before it, each of its own tenant:
however its statistics are sampled, the thousands of items of the one session a plan test
writes can be estimated as a row or two there, and the planner then takes any index of the
tenant as cheap as the right one. Here the session is the table's bulk, as a long session
is in a deployment's statistics, and the plan is the planner's own (migrated as the
suite's database is, partitioned under make test-partitioned).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from durable_agents.storage.db import make_engine, make_session_factory, migrate
from durable_agents.storage.partitioning import ENV_FLAG, partition_by_tenant
from durable_agents.workers.stack import DevStack


@dataclass(frozen=True)
class PlanDb:
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]


@pytest.fixture(scope="module", name="plan_db")
async def plan_database(devstack: DevStack) -> AsyncIterator[PlanDb]:
    name = f"plans_{uuid.uuid4().hex[:8]}"
    app_url = devstack.postgres.create_database(name)
    owner_url = devstack.postgres.url_for(name, role=devstack.postgres.owner)
    await migrate(owner_url)
    if os.environ.get(ENV_FLAG) == "1":
        await partition_by_tenant(owner_url)
    engine = make_engine(app_url)
    try:
        yield PlanDb(engine, make_session_factory(engine))
    finally:
        await engine.dispose()
        devstack.postgres.psql(f'DROP DATABASE "{name}" WITH (FORCE)')


async def analyze_items(db: PlanDb) -> None:
    """Statistics that count the session just written, as autovacuum keeps them."""
    async with db.engine.connect() as conn:
        await conn.execute(text("ANALYZE items"))
        await conn.commit()
