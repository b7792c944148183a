"""Rate limits: per API key across every gateway process (SharedRateLimiter, state in
AgentState), and in-process token buckets (RateLimiter: failed authentications per client
address, and each process's fallback for the per-key limit).

Per key, shared: a key's bucket is one row of `rate_limits` (storage/rate_limits.py),
taken in one atomic statement on its own autocommitted connection, so N gateway processes
allow a key its rate and burst once, not N times (bench/gateway_rate_limit.py measures the
cost per request).

When the database does not answer the take (an error, or no answer within
`timeout_seconds`), the limit fails OPEN TO EACH PROCESS'S OWN BUCKET, deliberately: the
request is limited by this process's in-memory bucket of the same rate and burst, so a key
gets at most N times its limit across N processes, never an unlimited rate, and a sick rate
table does not take the whole API down with it. For `retry_seconds` after a failure the
database is not asked again (no pile-up on a struggling server); the switch both ways is
logged. A database that is down altogether refuses requests anyway: the key itself is
looked up there first (workers/gateway/auth.py).

In-process: per-key fallback buckets exist only for keys that authenticated, so their
number is bounded by the key table; per-address buckets are bounded by `max_keys` (full
buckets go first, then the oldest: a forgotten address starts again with a full burst,
nothing worse). Failed authentications stay per process: they are refused before any key
is looked up, and a guesser spread over N processes still gets N times a small burst.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage import rate_limits
from durable_agents.storage.db import autocommit

log = logging.getLogger(__name__)

# The limiter's name in rate_limits: the gateway's per-key request limit.
GATEWAY_KEY_LIMITER = "gateway_key"
# Far above a healthy take (bench/gateway_rate_limit.py: well under a millisecond), far
# below what a person notices.
DB_TIMEOUT_SECONDS = 0.5
RETRY_DB_AFTER_SECONDS = 5.0
# How often one process deletes full buckets (one short statement; the table has a row
# per key that made a request lately).
SWEEP_EVERY_SECONDS = 60.0


class RateLimiter:
    def __init__(
        self,
        rate_per_second: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_keys: int | None = None,
    ) -> None:
        if rate_per_second <= 0 or burst < 1:
            raise ValueError("the rate must be > 0 and the burst >= 1")
        self._rate, self._burst, self._clock = rate_per_second, float(burst), clock
        self._max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}

    def _tokens(self, key: str, now: float) -> float:
        tokens, stamp = self._buckets.get(key, (self._burst, now))
        return min(self._burst, tokens + (now - stamp) * self._rate)

    def take(self, key: str) -> float:
        """Spend one token of `key`'s bucket: 0.0 if allowed, else seconds until one is."""
        now = self._clock()
        tokens = self._tokens(key, now)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            self._bound(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self._rate

    def wait(self, key: str) -> float:
        """Seconds until `key` has a token (0.0: it has one now), spending none."""
        tokens = self._tokens(key, self._clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate

    def _bound(self, now: float) -> None:
        if self._max_keys is None or len(self._buckets) <= self._max_keys:
            return
        for key in [k for k in self._buckets if self._tokens(k, now) >= self._burst]:
            del self._buckets[key]
        while len(self._buckets) > self._max_keys:  # oldest first: dicts keep insertion order
            del self._buckets[next(iter(self._buckets))]


class SharedRateLimiter:
    """Per-key buckets in AgentState, shared by every gateway process; this process's own
    buckets while the database does not answer (see the module docstring)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        rate_per_second: float,
        burst: int,
        *,
        limiter: str = GATEWAY_KEY_LIMITER,
        timeout_seconds: float = DB_TIMEOUT_SECONDS,
        retry_seconds: float = RETRY_DB_AFTER_SECONDS,
        sweep_seconds: float = SWEEP_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fallback = RateLimiter(rate_per_second, burst, clock)
        self._sessions, self._rate, self._burst = sessions, rate_per_second, burst
        self._limiter, self._timeout, self._retry = limiter, timeout_seconds, retry_seconds
        self._sweep_every, self._clock = sweep_seconds, clock
        self._down_until: float | None = None
        self._next_sweep = clock() + sweep_seconds

    @property
    def shared(self) -> bool:
        """Whether takes go to the database now (False: this process's buckets)."""
        return self._down_until is None or self._clock() >= self._down_until

    async def take(self, key: str) -> float:
        """Spend one request of `key`'s bucket: 0.0 if allowed, else seconds until one is."""
        if not self.shared:
            return self.fallback.take(key)
        try:
            async with asyncio.timeout(self._timeout):
                got = await self._take_shared(key)
        except (SQLAlchemyError, OSError, TimeoutError) as err:
            if self._down_until is None:
                log.warning(
                    "rate limits: the database did not answer (%s); each process limits "
                    "keys on its own for now",
                    type(err).__name__,
                )
            self._down_until = self._clock() + self._retry
            return self.fallback.take(key)
        if self._down_until is not None:
            log.info("rate limits: shared through the database again")
            self._down_until = None
        return got

    async def _take_shared(self, key: str) -> float:
        async with autocommit(self._sessions) as db:
            got = await rate_limits.take(
                db, self._limiter, key, rate_per_second=self._rate, burst=self._burst
            )
            if self._clock() >= self._next_sweep:
                self._next_sweep = self._clock() + self._sweep_every
                await rate_limits.sweep(db)
        return got.retry_after
