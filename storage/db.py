"""Engine, session factory and migrations for AgentState."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from durable_agents.storage.pool_ping import PING_AFTER_IDLE_S, ping_idle_connections

if TYPE_CHECKING:
    from alembic.config import Config

_MIGRATIONS = Path(__file__).parent / "migrations"


def make_engine(
    url: str,
    *,
    pool_size: int = 5,
    echo: bool = False,
    ping_after_idle_s: float = PING_AFTER_IDLE_S,
) -> AsyncEngine:
    """`ping_after_idle_s`: pooled connections idle for longer are pinged on checkout
    (storage/pool_ping.py); 0 pings on every checkout."""
    engine = create_async_engine(url, pool_size=pool_size, echo=echo)
    ping_idle_connections(engine, ping_after_idle_s)
    return engine


def make_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    # expire_on_commit=False: activities read attributes after the unit of work commits.
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def autocommit(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session whose statements each commit by themselves: no BEGIN and COMMIT round
    trips. For reads (under READ COMMITTED every statement reads its own snapshot anyway,
    so a read-only transaction adds nothing) and for a single write that needs no partner.
    Nothing here holds a transaction open."""
    async with sessions() as db:
        await db.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        yield db


def _alembic_config(url: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


async def migrate(url: str) -> None:
    """Bring the database at `url` to the latest schema (idempotent)."""
    # Alembic (and Mako under it) is imported here, not at the top: workers never migrate.
    from alembic import command

    # Alembic's env runs its own event loop, so it gets a thread of its own.
    await asyncio.to_thread(command.upgrade, _alembic_config(url), "head")
