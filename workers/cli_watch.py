"""`agentctl watch`: each committed item of a task as it commits, until the task ends."""

from __future__ import annotations

from storage.models import SessionRow
from storage.session_events import EventHub, listen_dsn
from workers import tasks
from workers.cli_common import (
    After,
    Tenant,
    console,
    run_async,
    session_id,
    tenant_or_default,
    with_resources,
)
from workers.gateway.events import RECHECK_SECONDS
from workers.render import print_item
from workers.resources import Resources
from workers.session_watch import watch_items
from workers.settings import get_settings
from workers.wait_status import wait_line


def watch_cmd(session: str, tenant: Tenant = None, after: After = 0) -> None:
    """Print each item as it is committed, until the task ends."""
    session, t = session_id(session), tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        seen: list[str] = []

        def status_changed(row: SessionRow) -> None:
            # A model wait is news whenever it shows; the status a watch starts in is not.
            line = wait_line(row) or (f"status: {row.status}" if seen else None)
            seen.append(row.status)
            if line:
                console.print(line, markup=False, highlight=False, soft_wrap=True)

        # Woken by LISTEN/NOTIFY as items commit (the gateway's event stream does the same).
        hub = EventHub(listen_dsn(get_settings().database.url.get_secret_value()))
        await hub.start()
        try:
            async for item in watch_items(
                res.sessions,
                t,
                session,
                after=after,
                store=res.store,
                on_status=status_changed,
                hub=hub,
                poll_seconds=RECHECK_SECONDS,
            ):
                print_item(console, item)
        finally:
            await hub.aclose()
        row, _ = await tasks.read_session(res.sessions, t, session, limit=0, store=res.store)
        console.print(f"task ended: {row.status}")

    run_async(with_resources(go))
