"""Engine, session factory and migrations for AgentState."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from durable_agents.storage.pool_ping import PING_AFTER_IDLE_S, ping_idle_connections

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

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


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema stands against this code's migrations."""

    current: tuple[str, ...]  # the database's revision; () before its first migration
    pending: tuple[str, ...]  # this code's revisions the database lacks, oldest first

    @property
    def ready(self) -> bool:
        """The schema has every migration this code needs."""
        return not self.pending


async def schema_state(url: str, *, connect_timeout: float = 10) -> SchemaState:
    """Read where the database at `url` stands; changes nothing, so the workers' role may
    ask (alembic_version is one of its tables)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_alembic_config(url))

    def read(connection: Connection) -> tuple[str, ...]:
        return MigrationContext.configure(connection).get_current_heads()

    engine = create_async_engine(url, connect_args={"timeout": connect_timeout})
    try:
        async with engine.connect() as conn:
            current = await conn.run_sync(read)
    finally:
        await engine.dispose()
    return SchemaState(current, _pending(script, current))


def _pending(script: ScriptDirectory, current: tuple[str, ...]) -> tuple[str, ...]:
    known = {s.revision for s in script.walk_revisions()}
    if any(revision not in known for revision in current):
        # A later release migrated further: migrations only add, so this code runs on it
        # (and a rollback to this image is not held back).
        return ()
    newest_first = script.iterate_revisions("heads", current or "base")
    return tuple(reversed([s.revision for s in newest_first]))
