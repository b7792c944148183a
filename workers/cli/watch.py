"""`agentctl watch`: each committed item of a task as it commits, until the task ends.

Through the gateway (`--gateway URL` or AGENT_GATEWAY_URL, the key in AGENT_API_KEY) from
anywhere, holding nothing but the key; without one, straight from AgentState (a trusted
operator holding the database settings).
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from durable_agents.storage.listener import Listener
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.session_events import EventHub, listen_dsn
from durable_agents.vocabulary.session_status import shown_status
from durable_agents.workers.cli.common import (
    After,
    Tenant,
    console,
    err_console,
    run_async,
    session_id,
    tenant_or_default,
    with_resources,
)
from durable_agents.workers.client import tasks
from durable_agents.workers.client.gateway_client import KEY_ENV, URL_ENV, Gateway
from durable_agents.workers.client.watch.follow import watch_live
from durable_agents.workers.client.watch.follow_gateway import watch_via_gateway
from durable_agents.workers.client.watch.printer import WatchPrinter
from durable_agents.workers.client.watch.wait_status import wait_line
from durable_agents.workers.gateway.fanout import RECHECK_SECONDS
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings

GatewayUrl = Annotated[
    str | None,
    typer.Option(
        "--gateway",
        envvar=URL_ENV,
        show_envvar=True,
        help=f"Watch through the gateway at this URL, with the API key in {KEY_ENV} "
        "(no database, S3 or Temporal settings needed).",
    ),
]


def watch_cmd(
    session: str, tenant: Tenant = None, after: After = 0, gateway: GatewayUrl = None
) -> None:
    """Print each item as it is committed, until the task ends."""
    session = session_id(session)
    if gateway:
        if tenant is not None:
            raise ValueError("--tenant does not apply through the gateway: the API key's is used")
        run_async(
            _through_gateway(Gateway.checked(gateway, os.environ.get(KEY_ENV)), session, after)
        )
        return
    t = tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        with WatchPrinter(console) as printer:
            # Woken by LISTEN/NOTIFY as items commit, which also brings the token deltas
            # (the gateway's event stream does the same).
            listener = Listener(listen_dsn(get_settings().database.url.get_secret_value()))
            hub = EventHub(listener)
            async with listener:
                async for change in watch_live(
                    res.sessions,
                    t,
                    session,
                    after=after,
                    store=res.store,
                    hub=hub,
                    poll_seconds=RECHECK_SECONDS,
                    deltas=printer.show_deltas,
                ):
                    if isinstance(change, ItemRow):
                        printer.item(change)
                    elif isinstance(change, SessionRow):
                        printer.status(change.status, wait_line(change))
                    else:
                        printer.delta(change)
            row, _ = await tasks.read_session(res.sessions, t, session, limit=0, store=res.store)
            printer.ended(shown_status(row.status, row.checked))

    run_async(with_resources(go))


async def _through_gateway(gateway: Gateway, session: str, after: int) -> None:
    def reconnecting(why: str) -> None:
        err_console.print(f"lost the gateway ({why}); reconnecting", style="dim", markup=False)

    with WatchPrinter(console) as printer:
        await watch_via_gateway(gateway, session, printer, after=after, on_reconnect=reconnecting)
