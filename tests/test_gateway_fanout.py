"""One reader per session per process, fanned out (workers/gateway/fanout.py), on the real
PostgreSQL: many followers of one session get every item once, in order, while only one
reader follows the session; a follower that falls behind is cut off without delaying the
others and resumes after its Last-Event-ID with nothing lost or repeated; the reader stops
when the last follower leaves."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.listener import Listener
from durable_agents.storage.session_events import EventHub, listen_dsn
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.watch.follow import WATCH_PAGE
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.events import cursor_of, fanout, session_events
from durable_agents.workers.gateway.fanout import SessionFanout, StreamInterrupted
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, make_key
from tests.support.sse import sse_events

# Never rechecked by time: every event must come from a notification.
NO_RECHECK = 3600.0
FOLLOWERS = 20
ITEMS = 30


@pytest.fixture
async def hub(migrated: StackEndpoints) -> AsyncIterator[EventHub]:
    listener = Listener(listen_dsn(migrated.database_url))
    events = EventHub(listener)
    async with listener:
        yield events


async def _session(resources: Resources, tenant: str) -> str:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="fan-out", model_config={})
        await SessionRepository(db, tenant).set_status(sid, SessionStatus.RUNNING)
    return str(sid)


async def _commit(resources: Resources, tenant: str, sid: str, n: int) -> None:
    async with resources.sessions() as db, db.begin():
        await ItemRepository(db, tenant).append(
            NewItem(
                session_id=uuid.UUID(sid),
                kind=ItemKind.USER_MESSAGE,
                role="user",
                idempotency_key=f"fanout:{sid}:{n}",
                text=f"message {n}",
            )
        )


async def _commit_many(resources: Resources, tenant: str, sid: str, count: int) -> None:
    """`count` items in one transaction: the reader publishes a page of them at once."""
    async with resources.sessions() as db, db.begin():
        await ItemRepository(db, tenant).append_many(
            [
                NewItem(
                    session_id=uuid.UUID(sid),
                    kind=ItemKind.USER_MESSAGE,
                    role="user",
                    idempotency_key=f"burst:{sid}:{n}",
                    text=f"message {n}",
                )
                for n in range(count)
            ]
        )


async def _end(resources: Resources, tenant: str, sid: str) -> None:
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).set_status(uuid.UUID(sid), SessionStatus.COMPLETED)


async def _read(events: AsyncIterator[dict[str, Any]], got: list[int]) -> str:
    """Collect item ids until the stream ends; the last event's type."""
    last = ""
    async for event in events:
        last = event["event"]
        if last == "item":
            got.append(int(event["id"]))
    return last


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not reached within 10 s")


async def test_many_followers_get_every_item_once_in_order_from_one_reader(
    hub: EventHub, resources: Resources, tenant: str
) -> None:
    sid = await _session(resources, tenant)
    shared = fanout(hub, resources.sessions, recheck_seconds=NO_RECHECK)
    got: list[list[int]] = [[] for _ in range(FOLLOWERS)]

    def follower(i: int) -> asyncio.Task[str]:
        events = session_events(
            hub, resources.sessions, tenant, sid, recheck_seconds=NO_RECHECK, shared=shared
        )
        return asyncio.create_task(_read(events, got[i]))

    # Half join before anything commits, half while items are committing: a late follower
    # reads what it missed itself, then takes the reader's items, with no gap or overlap.
    early = [follower(i) for i in range(FOLLOWERS // 2)]
    await _until(lambda: shared.readers() == 1 and shared.followers() == FOLLOWERS // 2)
    late: list[asyncio.Task[str]] = []
    for n in range(ITEMS):
        await _commit(resources, tenant, sid, n)
        if n == ITEMS // 3:
            late = [follower(i) for i in range(FOLLOWERS // 2, FOLLOWERS)]
        if n == 2 * ITEMS // 3:
            # Every follower of the session in this process, one reader, one LISTEN follower.
            assert shared.followers() == FOLLOWERS and shared.readers() == 1
            assert hub.followers() == 1
    await _end(resources, tenant, sid)
    async with asyncio.timeout(30):
        ends = await asyncio.gather(*early, *late)
    assert ends == ["end"] * FOLLOWERS
    assert got == [list(range(1, ITEMS + 1))] * FOLLOWERS
    await _until(lambda: shared.readers() == 0 and hub.followers() == 0)


async def test_a_slow_follower_is_cut_off_without_delaying_others_and_resumes_after_its_last_id(
    hub: EventHub, resources: Resources, tenant: str
) -> None:
    sid = await _session(resources, tenant)
    bound = 5
    shared = fanout(hub, resources.sessions, recheck_seconds=NO_RECHECK, queue=bound)
    fast: list[int] = []
    fast_task = asyncio.create_task(
        _read(session_events(hub, resources.sessions, tenant, sid, shared=shared), fast)
    )
    slow = session_events(hub, resources.sessions, tenant, sid, shared=shared)
    slow_got: list[int] = []
    assert (await anext(slow))["event"] == "status"  # it follows, then stops reading
    await _until(lambda: shared.readers() == 1 and shared.followers() == 2)
    for n in range(ITEMS):
        await _commit(resources, tenant, sid, n)
    # The fast follower has every item while the slow one has read nothing since.
    await _until(lambda: len(fast) == ITEMS)
    assert fast == list(range(1, ITEMS + 1)) and shared.cut_offs == 1
    # The slow one was cut off at its bound: it gets what was queued before, never more,
    # and its stream then ends without `end`.
    with pytest.raises(StreamInterrupted):
        async for event in slow:
            assert event["event"] == "item"
            slow_got.append(int(event["id"]))
    assert len(slow_got) <= bound and shared.followers() == 1
    # It reconnects with Last-Event-ID and reads on, nothing lost or repeated.
    resumed = session_events(
        hub,
        resources.sessions,
        tenant,
        sid,
        cursor_of(str(slow_got[-1]) if slow_got else None, 0),
        shared=shared,
    )
    resumer = asyncio.create_task(_read(resumed, slow_got))
    await _until(lambda: len(slow_got) == ITEMS)
    await _commit(resources, tenant, sid, ITEMS)
    await _end(resources, tenant, sid)
    async with asyncio.timeout(30):
        assert list(await asyncio.gather(fast_task, resumer)) == ["end", "end"]
    assert fast == slow_got == list(range(1, ITEMS + 2))


async def test_the_reader_stops_when_the_last_follower_leaves(
    hub: EventHub, resources: Resources, tenant: str
) -> None:
    sid = await _session(resources, tenant)
    shared: SessionFanout = fanout(hub, resources.sessions, recheck_seconds=NO_RECHECK)
    streams = [session_events(hub, resources.sessions, tenant, sid, shared=shared) for _ in "abc"]
    for stream in streams:
        await anext(stream)
    pending = [asyncio.create_task(anext(s)) for s in streams]  # all three wait on the reader
    await _until(lambda: shared.readers() == 1 and hub.followers() == 1)
    for task in pending[:2]:  # two clients leave
        task.cancel()
    await asyncio.gather(*pending[:2], return_exceptions=True)
    assert shared.readers() == 1 and shared.followers() == 1  # one still follows
    pending[2].cancel()
    await asyncio.gather(pending[2], return_exceptions=True)

    def readers() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if t.get_name().startswith("sse-reader")]

    # The reader's task ends once its cancellation has run (it may still be unwinding).
    await _until(lambda: shared.readers() == 0 and not readers())
    assert shared.followers() == 0 and hub.followers() == 0


async def test_over_http_a_cut_off_stream_closes_without_end_and_resumes_after_last_event_id(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    sid = await _session(resources, tenant)
    settings = migrated.settings(workspace=Path("unused"), task_queue="unused", provider="scripted")
    settings.gateway = GatewaySettings(rate_per_second=1000, burst=1000)
    app = create_app(resources, client, settings)
    gateway = app.state.gateway
    # A bound below one page of the reader, so a burst of commits cuts the stream off (the
    # process's fan-out is built on first use; this sets it first).
    gateway.__dict__["streams"] = fanout(gateway.hub, resources.sessions, queue=10)
    burst = WATCH_PAGE + 100
    key = await make_key(resources, tenant, "read")
    path = f"/v1/sessions/{sid}/events"
    async with (
        serving(app) as url,
        httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=30) as http,
    ):
        first: list[dict[str, Any]] = []
        async with asyncio.timeout(30), http.stream("GET", path) as response:
            async for event in sse_events(response):
                first.append(event)
                if len(first) == 1:  # the status: the stream follows the session
                    await _commit_many(resources, tenant, sid, burst)
        seen = [int(e["id"]) for e in first if e["event"] == "item"]
        assert [e["event"] for e in first if e["event"] != "item"] == ["status"]  # no `end`
        assert seen == list(range(1, len(seen) + 1)) and len(seen) < burst
        assert gateway.streams.cut_offs == 1
        await _end(resources, tenant, sid)
        headers = {"Last-Event-ID": str(seen[-1])} if seen else {}
        rest: list[dict[str, Any]] = []
        async with asyncio.timeout(30), http.stream("GET", path, headers=headers) as response:
            rest = [e async for e in sse_events(response)]
    assert seen + [int(e["id"]) for e in rest if e["event"] == "item"] == list(range(1, burst + 1))
    assert rest[-1]["event"] == "end" and gateway.streams.readers() == 0
