"""The process's one LISTEN connection (storage/listener.py) on the real PostgreSQL, reached
through a TCP proxy that can refuse or hold new connections (a server restarting behind
it): its backend killed with pg_terminate_backend, every subscriber (a session's event
stream, a device's long-poll) hears again and reads what committed while it was down,
and a start while it reconnects opens no second connection."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from durable_agents.storage.device_calls import CALLS_CHANNEL, DeviceCallRepository, wake_payload
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.listener import Listener
from durable_agents.storage.session_events import CHANNEL, EventHub, listen_dsn
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.device_dispatch.wakes import DeviceWakes
from durable_agents.workers.gateway.events import session_events
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.tcp_proxy import TcpProxy, tcp_proxy

# Never re-read by time: what a subscriber reads after the kill, a wake made it read.
NO_RECHECK = 3600.0


@asynccontextmanager
async def _proxied(storage: StackEndpoints) -> AsyncIterator[tuple[TcpProxy, str]]:
    """A proxy in front of PostgreSQL, and the listener DSN through it."""
    url = make_url(storage.database_url)
    async with tcp_proxy(f"tcp://{url.host}:{url.port}") as (proxy, address):
        through = url.set(host="127.0.0.1", port=urlsplit(address).port)
        yield proxy, listen_dsn(through.render_as_string(hide_password=False))


@pytest.fixture
async def admin(migrated_storage: StackEndpoints) -> AsyncIterator[Any]:
    """A direct connection, as the listener's role (which may end its own backends)."""
    conn = await asyncpg.connect(listen_dsn(migrated_storage.database_url))
    yield conn
    await conn.close()


async def _listening_backends(admin: Any) -> set[int]:
    rows = await admin.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()"
    )
    return {int(r["pid"]) for r in rows}


async def _kill(admin: Any, pid: int | None) -> None:
    """End the listener's backend, as an operator or a crash would, and wait until gone."""
    assert pid is not None, "the listener is not connected"
    assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    for _ in range(1000):
        if not await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the backend outlived pg_terminate_backend by 10 s")


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not reached within 10 s")


async def _session(resources: Resources, tenant: str) -> str:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="listen", model_config={})
        await SessionRepository(db, tenant).set_status(sid, SessionStatus.RUNNING)
    return str(sid)


async def _commit_item(resources: Resources, tenant: str, sid: str, n: int) -> None:
    async with resources.sessions() as db, db.begin():
        await ItemRepository(db, tenant).append(
            NewItem(
                session_id=uuid.UUID(sid),
                kind=ItemKind.USER_MESSAGE,
                role="user",
                idempotency_key=f"listen:{sid}:{n}",
                text=f"message {n}",
            )
        )


async def _offer_call(resources: Resources, tenant: str, device: str, n: int) -> None:
    async with resources.sessions() as db, db.begin():
        await DeviceCallRepository(db, tenant, device).offer(
            idempotency_key=f"listen:{device}:{n}",
            session_id=uuid.uuid4(),
            tool_call_id=f"call-{n}",
            tool_name="read_file",
            step=n,
            rerun=0,
            task_token=b"token",
            attempt=1,
        )


async def _calls(resources: Resources, tenant: str, device: str) -> set[str]:
    async with resources.sessions() as db, db.begin():
        return {c.tool_call_id for c in await DeviceCallRepository(db, tenant, device).waiting()}


async def _stream_items(events: AsyncIterator[dict[str, Any]], seen: list[int]) -> None:
    async for event in events:
        if event["event"] == "item":
            seen.append(int(event["id"]))


async def test_every_subscriber_reads_what_committed_while_its_backend_was_killed(
    migrated_storage: StackEndpoints, resources: Resources, admin: Any, tenant: str
) -> None:
    sid = await _session(resources, tenant)
    device = f"laptop-{uuid.uuid4().hex[:6]}"
    async with _proxied(migrated_storage) as (proxy, dsn):
        listener = Listener(dsn)
        hub, wakes = EventHub(listener), DeviceWakes(listener)
        async with listener:
            seen: list[int] = []
            stream = session_events(
                hub, resources.sessions, tenant, sid, recheck_seconds=NO_RECHECK
            )
            reader = asyncio.create_task(_stream_items(stream, seen))
            with wakes.waiting(tenant, device) as woken:
                await _commit_item(resources, tenant, sid, 1)
                await _offer_call(resources, tenant, device, 1)
                await _until(lambda: seen == [1] and woken.is_set())
                woken.clear()

                # The server is away: its backend ended and new connections refused.
                proxy.refusing = True
                await _kill(admin, listener.server_pid)
                change = json.dumps({"t": tenant, "s": sid})
                await admin.execute("SELECT pg_notify($1, $2)", CHANNEL, change)
                await admin.execute(
                    "SELECT pg_notify($1, $2)", CALLS_CHANNEL, wake_payload(tenant, device)
                )
                await _commit_item(resources, tenant, sid, 2)
                await _offer_call(resources, tenant, device, 2)
                await _until(lambda: proxy.connections >= 3)  # it tried, and was refused
                assert seen == [1]  # nothing was heard of them
                woken.clear()  # a wake before the connection is back carries no news

                proxy.refusing = False
                # Listening again, each subscriber re-reads and finds what committed.
                await _until(lambda: seen == [1, 2] and woken.is_set())
                assert await _calls(resources, tenant, device) == {"call-1", "call-2"}

                # And hears what commits from now on, on every channel.
                woken.clear()
                await _commit_item(resources, tenant, sid, 3)
                await _offer_call(resources, tenant, device, 3)
                await _until(lambda: seen == [1, 2, 3] and woken.is_set())
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            assert await _listening_backends(admin) == {listener.server_pid}


async def test_a_start_while_it_reconnects_opens_no_second_connection(
    migrated_storage: StackEndpoints, resources: Resources, admin: Any, tenant: str
) -> None:
    sid = await _session(resources, tenant)
    async with _proxied(migrated_storage) as (proxy, dsn):
        listener = Listener(dsn)
        hub, wakes = EventHub(listener), DeviceWakes(listener)
        async with listener:
            await asyncio.gather(listener.start(), hub.ensure_started(), wakes.ensure_started())
            first = listener.server_pid
            assert await _listening_backends(admin) == {first}

            proxy.hold()  # the reconnect's connection waits unanswered
            await _kill(admin, first)
            await _until(lambda: proxy.connections == 2)
            starts = asyncio.gather(
                listener.start(), hub.ensure_started(), wakes.ensure_started(), listener.start()
            )
            # Nobody waits on the outage, nor opens a connection of their own.
            await asyncio.wait_for(starts, 5)
            assert proxy.connections == 2
            proxy.release()

            await _until(lambda: listener.server_pid not in (None, first))
            assert await _listening_backends(admin) == {listener.server_pid}
            assert proxy.connections == 2  # the first and the one reconnect, no other
            with hub.follow(tenant, sid) as woken:
                before = hub.notifications
                await _commit_item(resources, tenant, sid, 1)
                await asyncio.wait_for(woken.get(), 10)
                await asyncio.sleep(0.2)
                assert hub.notifications == before + 1  # heard once, on one connection


async def test_a_listener_started_while_the_server_refuses_listens_once_it_is_back(
    migrated_storage: StackEndpoints, resources: Resources, tenant: str
) -> None:
    sid = await _session(resources, tenant)
    device = f"laptop-{uuid.uuid4().hex[:6]}"
    async with _proxied(migrated_storage) as (proxy, dsn):
        proxy.refusing = True
        listener = Listener(dsn)
        hub, wakes = EventHub(listener), DeviceWakes(listener)
        async with listener:
            # Neither subscriber's start raises or waits: both are left to their re-reads.
            await asyncio.wait_for(asyncio.gather(hub.ensure_started(), wakes.ensure_started()), 5)
            assert listener.server_pid is None
            with hub.follow(tenant, sid) as changed, wakes.waiting(tenant, device) as woken:
                await _commit_item(resources, tenant, sid, 1)
                await _offer_call(resources, tenant, device, 1)
                proxy.refusing = False
                await asyncio.wait_for(asyncio.gather(changed.get(), woken.wait()), 10)
                assert listener.server_pid is not None
                await _commit_item(resources, tenant, sid, 2)
                assert (await asyncio.wait_for(changed.get(), 10)).ordinal == 2
