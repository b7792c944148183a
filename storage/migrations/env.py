"""Alembic environment: async engine, URL handed in by durable_agents.storage.db.migrate()."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from durable_agents.storage import (
    decision_requests,  # noqa: F401  (registers decision_requests)
    device_models,  # noqa: F401  (registers devices, device_calls)
    outbox_models,  # noqa: F401  (registers trajectory_outbox on Base)
    rate_limits,  # noqa: F401  (registers rate_limits)
    usage_models,  # noqa: F401  (registers model_usage, session_spend)
)
from durable_agents.storage.models import Base

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError(
            "durable_agents.storage.migrations: sqlalchemy.url was not set by migrate()"
        )
    asyncio.run(_run_async(url))


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; run migrate()")
run_migrations_online()
