"""A key's rate limit holds across gateway processes: two real `agentctl gateway` processes
sharing one key allow its burst once between them, not once each. The shared bucket
(storage/rate_limits.py) is atomic under concurrent takes, refills at its rate, names
when to retry and sweeps only full buckets; when the database does not answer, the
limiter falls back to each process's own bucket (fail open to per-process limits, never
unlimited) and goes back to the shared one when it answers again."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url

from durable_agents.storage import rate_limits
from durable_agents.storage.db import autocommit, make_engine, make_session_factory
from durable_agents.workers.gateway.rate_limit import SharedRateLimiter
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, make_key
from tests.support.mcp import free_port

AGENTCTL = Path(sys.executable).parent / "agentctl"
BURST = 5


@asynccontextmanager
async def _gateway_process(env: dict[str, str]) -> AsyncIterator[str]:
    """`agentctl gateway` on a free loopback port until the block ends; its base URL."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        "gateway",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base) as http, asyncio.timeout(60):
            while True:
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await proc.wait()


async def test_two_gateway_processes_allow_a_key_its_burst_once_between_them(
    migrated: StackEndpoints, resources: Resources, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read", user="erin")
    env = {
        **os.environ,
        **migrated.env(),
        "AGENT_TENANT_ID": "nobody",
        # A refill far slower than the test: only the burst is ever allowed.
        "GATEWAY_RATE_PER_SECOND": "0.001",
        "GATEWAY_BURST": str(BURST),
    }
    async with AsyncExitStack() as stack:
        bases = await asyncio.gather(
            stack.enter_async_context(_gateway_process(env)),
            stack.enter_async_context(_gateway_process(env)),
        )
        answers: list[httpx.Response] = []
        async with httpx.AsyncClient() as http:
            for i in range(4 * BURST):  # alternating between the two processes
                answers.append(await http.get(f"{bases[i % 2]}/v1/me", headers=bearer(key)))
    codes = [a.status_code for a in answers]
    assert codes.count(200) == BURST, codes  # per process, it would be 2 * BURST
    assert set(codes) == {200, 429}, codes
    refused = [a for a in answers if a.status_code == 429]
    assert {a.json()["error"]["type"] for a in refused} == {"rate_limited"}
    # One token per 1,000 s, the burst spent: the wait named is most of that.
    assert all(int(a.headers["Retry-After"]) > 900 for a in refused)


async def test_concurrent_takes_of_one_bucket_allow_exactly_its_burst(
    resources: Resources,
) -> None:
    subject = uuid.uuid4().hex

    async def one() -> bool:
        async with autocommit(resources.sessions) as db:
            got = await rate_limits.take(db, "test", subject, rate_per_second=0.001, burst=10)
        return got.allowed

    results = await asyncio.gather(*(one() for _ in range(40)))
    assert results.count(True) == 10


async def test_a_shared_bucket_refills_at_its_rate_and_names_the_wait(
    resources: Resources,
) -> None:
    subject = uuid.uuid4().hex
    # One request per 500 ms: on a loaded machine a take can take more than 50 ms, and a
    # faster bucket would refill between two takes the test expects refused.
    rate = 2.0

    async def take() -> rate_limits.Take:
        async with autocommit(resources.sessions) as db:
            return await rate_limits.take(db, "test", subject, rate_per_second=rate, burst=2)

    assert (await take()).allowed and (await take()).allowed
    refused = await take()
    assert not refused.allowed and 0 < refused.retry_after <= 1 / rate
    await asyncio.sleep(refused.retry_after + 0.01)
    assert (await take()).allowed
    assert not (await take()).allowed  # the refill was one request, not a new burst


async def test_the_sweep_deletes_only_full_buckets(resources: Resources) -> None:
    spent, idle = uuid.uuid4().hex, uuid.uuid4().hex
    async with autocommit(resources.sessions) as db:
        await rate_limits.take(db, "test", spent, rate_per_second=0.001, burst=3)
        await rate_limits.take(db, "test", idle, rate_per_second=1000, burst=3)
        await asyncio.sleep(0.01)  # the idle bucket's one request has refilled
        await rate_limits.sweep(db)
        left = set(
            await db.scalars(
                text("SELECT subject FROM rate_limits WHERE subject IN (:a, :b)"),
                {"a": spent, "b": idle},
            )
        )
    assert left == {spent}


async def test_an_unreachable_database_falls_back_to_this_process_bucket(
    migrated: StackEndpoints,
) -> None:
    # A port nothing listens on: the database does not answer at all.
    url = make_url(migrated.database_url).set(port=free_port())
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        limiter = SharedRateLimiter(make_session_factory(engine), 0.001, 3, timeout_seconds=5)
        waits = [await limiter.take("k") for _ in range(5)]
    finally:
        await engine.dispose()
    assert not limiter.shared
    # Fail open to the process's own bucket: its burst, then refusals; never unlimited.
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert all(w > 900 for w in waits[3:]), waits


async def test_a_database_that_does_not_answer_in_time_is_skipped_then_asked_again(
    resources: Resources,
) -> None:
    now = [0.0]
    limiter = SharedRateLimiter(
        resources.sessions, 0.001, 2, timeout_seconds=0.3, retry_seconds=5, clock=lambda: now[0]
    )
    key = uuid.uuid4().hex
    assert await limiter.take(key) == 0.0  # the shared row exists, one request spent
    async with resources.engine.connect() as holder:
        # Another transaction holds the row: the take waits past its timeout.
        await holder.execute(
            text("SELECT 1 FROM rate_limits WHERE subject = :s FOR UPDATE"), {"s": key}
        )
        assert await limiter.take(key) == 0.0  # this process's own (full) bucket
        assert not limiter.shared
        assert await limiter.take(key) == 0.0  # still its own: not asked again yet
        await holder.rollback()
    now[0] += 5
    assert limiter.shared
    # The shared bucket again: one of its two was spent before, so one is left.
    assert await limiter.take(key) == 0.0
    assert await limiter.take(key) > 900


async def test_the_limiter_sweeps_full_buckets_as_it_takes(resources: Resources) -> None:
    idle = uuid.uuid4().hex
    async with autocommit(resources.sessions) as db:
        await rate_limits.take(db, "gateway_key", idle, rate_per_second=1000, burst=3)
    await asyncio.sleep(0.01)  # its one request has refilled: a full bucket
    now = [0.0]
    limiter = SharedRateLimiter(resources.sessions, 1000, 3, sweep_seconds=60, clock=lambda: now[0])
    await limiter.take(uuid.uuid4().hex)  # not due yet
    async with autocommit(resources.sessions) as db:
        query = text("SELECT count(*) FROM rate_limits WHERE subject = :s")
        assert await db.scalar(query, {"s": idle}) == 1
        now[0] += 60
        await limiter.take(uuid.uuid4().hex)
        assert await db.scalar(query, {"s": idle}) == 0
