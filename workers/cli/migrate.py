"""agentctl migrate: apply AgentState's migrations, or check (and wait) that they ran.

`--check --wait` is what holds a worker or gateway pod (its init container) until the
release's migration Job has brought the schema to this image's head: the pods start with
the Job, in any order (`kubectl apply -k`), and serve only once the schema is there.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from durable_agents.storage.db import SchemaState, migrate, schema_state
from durable_agents.storage.errors import SchemaNotMigrated
from durable_agents.workers.cli.common import (
    check_database_url,
    console,
    run_async,
    with_resources,
)
from durable_agents.workers.cli.errors import ServiceUnavailable
from durable_agents.workers.cli.gc import parse_duration
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings

# Between checks while waiting: 2 s, doubling to at most 30 s (a check is one short query).
WAIT_FIRST_S = 2.0
WAIT_MAX_S = 30.0


def _duration(value: str | None) -> str | None:
    # At parse time, so a bad value is a usage error before anything is reached.
    if value is not None:
        try:
            parse_duration(value)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
    return value


def migrate_cmd(
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Apply nothing: exit 0 if the schema at DATABASE_URL has every migration "
            "of this code (or a later release's), 1 if not.",
        ),
    ] = False,
    wait: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            callback=_duration,
            help="With --check: check again (every 2s, doubling to 30s) until it passes "
            "or DURATION (30s, 15m) has passed.",
        ),
    ] = None,
) -> None:
    """Apply AgentState migrations to DATABASE_MIGRATION_URL (the schema owner's role);
    with --check, only check that they ran."""
    if wait is not None and not check:
        raise typer.BadParameter("only with --check", param_hint="--wait")
    if check:
        window = parse_duration(wait).total_seconds() if wait is not None else None
        state = run_async(_check(window))
        at = ", ".join(state.current) or "no migration"
        console.print(
            f"AgentState schema at {at}: every migration of this code has run", markup=False
        )
        return
    url = get_settings().database.migration_url.get_secret_value()

    async def go(_: Resources) -> None:
        await migrate(url)

    run_async(with_resources(go))
    console.print("migrations applied")


async def _check(window: float | None) -> SchemaState:
    """The schema's state once it has this code's migrations; SchemaNotMigrated or
    ServiceUnavailable if it has not by the end of `window` (None: one check)."""
    url = get_settings().database.url.get_secret_value()
    check_database_url(url)
    parsed = make_url(url)
    where = f"{parsed.host}:{parsed.port or 5432}"
    deadline = time.monotonic() + (window or 0)
    pause = WAIT_FIRST_S
    while True:
        try:
            state = await schema_state(url)
            if state.ready:
                return state
            failure: Exception = SchemaNotMigrated(state.current, state.pending)
            line = str(failure)
        except OSError as err:  # refused, unresolvable, timed out: it may not be up yet
            failure = ServiceUnavailable("PostgreSQL", "DATABASE_URL", f"{where}: {err}")
            line = f"cannot reach PostgreSQL at {where} ({err})"
        except SQLAlchemyError as err:  # reached, and refused: the role may not exist yet
            failure = err
            line = f"PostgreSQL at {where} said: {getattr(err, 'orig', None) or err}"
        left = deadline - time.monotonic()
        if window is None or left <= 0:
            raise failure
        pause = min(pause, left)
        console.print(
            f"waiting: {line}; next check in {round(pause, 1):g}s",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        await asyncio.sleep(pause)
        pause = min(pause * 2, WAIT_MAX_S)
