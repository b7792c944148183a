"""Per-key rate limits: one in-process token bucket per API key.

In-process is deliberate: each gateway process limits on its own, so N processes allow N
times the rate. Buckets exist only for keys that authenticated, so their number is bounded
by the key table.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    def __init__(
        self, rate_per_second: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate_per_second <= 0 or burst < 1:
            raise ValueError("the rate must be > 0 and the burst >= 1")
        self._rate, self._burst, self._clock = rate_per_second, float(burst), clock
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> float:
        """Spend one token of `key`'s bucket: 0.0 if allowed, else seconds until one is."""
        now = self._clock()
        tokens, stamp = self._buckets.get(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - stamp) * self._rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self._rate
