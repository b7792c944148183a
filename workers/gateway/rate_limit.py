"""In-process token buckets: per API key (requests), and per client address (failed
authentications).

In-process is deliberate: each gateway process limits on its own, so N processes allow N
times the rate. Per-key buckets exist only for keys that authenticated, so their number is
bounded by the key table; per-address buckets are bounded by `max_keys` (full buckets go
first, then the oldest: a forgotten address starts again with a full burst, nothing worse).
"""

from __future__ import annotations

import time
from collections.abc import Callable


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
