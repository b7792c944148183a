"""Token deltas between a worker and the gateway's EventHub, on the real PostgreSQL: split
under NOTIFY's payload limit, coalesced to a bounded rate, flushed whole, delivered only to
followers of the same tenant's session, and never a failure of the model call."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from durable_agents.activities.model_deltas import DEFAULT_INTERVAL_SECONDS, DeltaStream
from durable_agents.storage.listener import Listener
from durable_agents.storage.session_deltas import (
    MAX_PAYLOAD_BYTES,
    Delta,
    DeltaPublisher,
    encode_deltas,
    parse_delta,
)
from durable_agents.storage.session_events import DELTA_QUEUE, EventHub, listen_dsn
from durable_agents.workers.stack import StackEndpoints

# Every kind of character the JSON of a payload spends differently on: ASCII, escapes,
# control characters (6 bytes each), 2-, 3- and 4-byte UTF-8.
MIXED = 'plain "quoted" \\ \n\x01\x1f é ü 漢字 😀 '


@pytest.fixture
async def hub(migrated: StackEndpoints) -> AsyncIterator[EventHub]:
    listener = Listener(listen_dsn(migrated.database_url))
    events = EventHub(listener)
    async with listener:
        yield events


@pytest.fixture
async def publisher(migrated: StackEndpoints) -> AsyncIterator[DeltaPublisher]:
    p = DeltaPublisher(listen_dsn(migrated.database_url))
    yield p
    await p.aclose()


def _stream(publisher: DeltaPublisher, tenant: str, sid: str, **kw: float) -> DeltaStream:
    return DeltaStream(publisher, tenant, sid, step=3, attempt=2, send=1, **kw)


async def _received(queue: asyncio.Queue[Delta], text: str) -> list[Delta]:
    """Deltas off the queue until their text adds up to `text`."""
    got: list[Delta] = []
    async with asyncio.timeout(20):
        while "".join(d.text for d in got) != text:
            got.append(await queue.get())
    return got


def test_long_text_is_split_under_the_payload_limit_with_consecutive_seq() -> None:
    text = MIXED * 1500  # about 60 KB of JSON
    payloads = encode_deltas(Delta("tenant-a", "session-1", 3, 2, 1, 7, text))
    assert len(payloads) > 5
    assert all(len(p.encode()) <= MAX_PAYLOAD_BYTES < 8000 for p in payloads)
    deltas = [parse_delta(p) for p in payloads]
    assert [d.seq for d in deltas if d] == list(range(7, 7 + len(payloads)))
    assert "".join(d.text for d in deltas if d) == text
    assert {(d.tenant_id, d.session_id, d.step, d.attempt, d.send) for d in deltas if d} == {
        ("tenant-a", "session-1", 3, 2, 1)
    }
    assert encode_deltas(Delta("t", "s", 0, 1, 0, 0, "hi")) == [
        json.dumps(
            {"t": "t", "s": "s", "step": 0, "attempt": 1, "send": 0, "seq": 0, "text": "hi"},
            separators=(",", ":"),
        )
    ]


def test_a_foreign_payload_on_the_channel_is_ignored() -> None:
    for junk in ("", "{", "[]", '{"t":"a","s":"b"}', '{"t":"a","s":"b","step":"1","attempt":1,'):
        assert parse_delta(junk) is None
    bad_seq = {"t": "a", "s": "b", "step": 1, "attempt": 1, "send": 0, "seq": True, "text": "x"}
    assert parse_delta(json.dumps(bad_seq)) is None


async def test_deltas_reach_only_that_tenants_session_followers(
    hub: EventHub, publisher: DeltaPublisher
) -> None:
    sid = str(uuid.uuid4())  # the same session id under two tenants
    text = "only for tenant a " * 3
    with (
        hub.follow_deltas("tenant-a", sid) as mine,
        hub.follow_deltas("tenant-b", sid) as theirs,
        hub.follow_deltas("tenant-a", str(uuid.uuid4())) as other_session,
    ):
        stream = _stream(publisher, "tenant-a", sid)
        for word in text.split(" "):
            await stream(word + " ")
        await stream.flush()
        got = await _received(mine, "".join(w + " " for w in text.split(" ")))
        # Notifications reach the hub in order: by now the others' would have come.
        assert theirs.empty() and other_session.empty()
    assert [d.seq for d in got] == list(range(len(got)))
    assert {(d.step, d.attempt, d.send) for d in got} == {(3, 2, 1)}


async def test_pieces_are_coalesced_to_a_bounded_rate_and_flushed_whole(
    hub: EventHub, publisher: DeltaPublisher
) -> None:
    sid, tenant = str(uuid.uuid4()), "tenant-rate"
    pieces = [f"tok{n} " for n in range(400)]
    loop = asyncio.get_running_loop()
    with hub.follow_deltas(tenant, sid) as queue:
        stream = _stream(publisher, tenant, sid)
        started = loop.time()
        for piece in pieces:  # a fast model: a token every millisecond or so
            await stream(piece)
            await asyncio.sleep(0.001)
        await stream.flush()
        elapsed = loop.time() - started
        got = await _received(queue, "".join(pieces))
    assert stream.pieces == 400
    # One NOTIFY per interval at most, plus the flush.
    assert len(got) == stream.published <= elapsed / DEFAULT_INTERVAL_SECONDS + 2
    assert len(got) < 100
    assert [d.seq for d in got] == list(range(len(got)))


async def test_a_long_burst_is_split_and_every_piece_arrives(
    hub: EventHub, publisher: DeltaPublisher
) -> None:
    sid, tenant = str(uuid.uuid4()), "tenant-burst"
    text = MIXED * 800
    with hub.follow_deltas(tenant, sid) as queue:
        stream = _stream(publisher, tenant, sid)
        await stream(text)
        await stream.flush()
        got = await _received(queue, text)
    assert len(got) > 1 and [d.seq for d in got] == list(range(len(got)))


async def test_publishing_to_an_unreachable_database_never_fails_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    broken = DeltaPublisher("postgresql://agent@127.0.0.1:9/agent")
    caplog.set_level(logging.WARNING)
    for attempt in (1, 2):
        stream = DeltaStream(broken, "t", "s", step=0, attempt=attempt, send=0)
        for word in ("secret ", "reply ", "text"):
            await stream(word)
        await stream.flush()  # returns, raises nothing
    await broken.aclose()
    assert broken.failures == 2 and broken.notifies == 0
    warnings = [r for r in caplog.records if r.name == "durable_agents.storage.session_deltas"]
    assert len(warnings) == 1  # once per process, not per call
    assert "secret" not in caplog.text and "reply" not in caplog.text


async def test_flush_sends_what_is_buffered_without_waiting_for_the_interval(
    hub: EventHub, publisher: DeltaPublisher
) -> None:
    sid, tenant = str(uuid.uuid4()), "tenant-flush"
    with hub.follow_deltas(tenant, sid) as queue:
        # An interval far longer than this test may take: only flush() can send the rest.
        stream = _stream(publisher, tenant, sid, interval=600)
        await stream("first")  # sent at once: nothing was sent before it
        await _received(queue, "first")
        for piece in (" second", " third"):
            await stream(piece)
        async with asyncio.timeout(10):
            await stream.flush()
            got = await _received(queue, " second third")
    assert [(d.seq, d.text) for d in got] == [(1, " second third")]


async def test_a_slow_follower_loses_deltas_not_its_place(
    hub: EventHub, publisher: DeltaPublisher
) -> None:
    sid, tenant = str(uuid.uuid4()), "tenant-slow"
    with hub.follow_deltas(tenant, sid) as slow, hub.follow_deltas(tenant, sid) as fast:
        stream = _stream(publisher, tenant, sid, interval=0)
        pieces = [f"p{n} " for n in range(DELTA_QUEUE + 50)]
        got: list[Delta] = []
        async with asyncio.timeout(20):
            for piece in pieces:
                await stream(piece)
                await stream.flush()  # one NOTIFY per piece
                got.append(await fast.get())  # the fast follower reads each as it comes
        assert "".join(d.text for d in got) == "".join(pieces)
        assert slow.qsize() == DELTA_QUEUE  # the slow one kept the oldest, dropped the rest
        kept = [slow.get_nowait() for _ in range(DELTA_QUEUE)]
    assert [d.seq for d in kept] == list(range(DELTA_QUEUE))
    assert hub.dropped_deltas >= 50
