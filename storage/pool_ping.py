"""Liveness checks of pooled PostgreSQL connections, only where one can have gone stale.

SQLAlchemy's `pool_pre_ping` pings on every checkout, and the asyncpg dialect's ping is
three round trips (BEGIN, an empty query, ROLLBACK). A busy worker checks a connection out
several times per activity, milliseconds after the last use, so those pings were ~8% of
its Python CPU at 20 approvals/s (docs/BENCHMARKS.md "Worker CPU per park and per
approval"). Here a connection is pinged only when it sat in the pool for longer than
`after_idle_s`; one that was used just now is handed out as it is. If the server went
away in between, that connection's first statement fails with a disconnect: SQLAlchemy
then invalidates every pooled connection, and the activity's attempt is retried.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import AsyncEngine

# Long enough that a busy worker never pings, short next to a server restart.
PING_AFTER_IDLE_S = 1.0

_IDLE_SINCE = "durable_agents_idle_since"


def ping_idle_connections(engine: AsyncEngine, after_idle_s: float = PING_AFTER_IDLE_S) -> None:
    """Ping a connection on checkout when it was idle for more than `after_idle_s` (0: on
    every checkout, like `pool_pre_ping`). Create `engine` without `pool_pre_ping`."""
    sync_engine = engine.sync_engine
    dialect = sync_engine.dialect

    @event.listens_for(sync_engine, "checkin")
    def _idle_from(dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(sync_engine, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is not None and time.monotonic() - since <= after_idle_s:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as err:
            if dialect.is_disconnect(err, dbapi_connection, None):
                # As pool_pre_ping does: the server went away, so every older pooled
                # connection is suspect too; the pool reconnects and checks out again.
                raise exc.InvalidatePoolError() from err
            raise
