"""The per-request cost of the gateway's shared per-key rate limit (workers/gateway/rate_limit.py).

Every authenticated gateway request takes one request from its key's bucket: a pool
checkout, one autocommitted upsert on the UNLOGGED `rate_limits` table
(storage/rate_limits.py) and the connection's return. Measured here on a throwaway
PostgreSQL, through SharedRateLimiter.take exactly as the gateway calls it:

- `sequential`: one caller, `--keys` keys in turn (each take is one round trip);
- `concurrent, many keys`: `--callers` concurrent callers, each on its own key;
- `concurrent, one key`: the same callers on one key (they queue on its row lock);
- `in-process`: the old per-process bucket (RateLimiter.take), for scale.

Reported: p50, p95 and max per take, in ms, and takes per second for the concurrent runs.

    cd bench && ../.venv/bin/python gateway_rate_limit.py --takes 3000 --callers 16
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from throwaway_stack import bench_resources

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durable_agents.workers.gateway.rate_limit import RateLimiter, SharedRateLimiter
from durable_agents.workers.resources import Resources

# Never refuses during the run: what is measured is the cost, not the limit.
RATE, BURST = 1e6, 10**6


def _row(what: str, times: list[float], wall: float | None = None) -> str:
    times = sorted(times)
    p95 = times[max(0, int(len(times) * 0.95) - 1)]
    rate = f"{len(times) / wall:,.0f}" if wall else ""
    return (
        f"| {what} | {len(times)} | {statistics.median(times):.3f} | {p95:.3f} "
        f"| {times[-1]:.3f} | {rate} |"
    )


async def _timed(limiter: SharedRateLimiter, key: str, times: list[float]) -> None:
    start = time.perf_counter()
    wait = await limiter.take(key)
    times.append((time.perf_counter() - start) * 1000)
    assert wait == 0.0 and limiter.shared


async def _sequential(limiter: SharedRateLimiter, takes: int, keys: int) -> list[float]:
    times: list[float] = []
    for n in range(takes):
        await _timed(limiter, f"key-{n % keys}", times)
    return times


async def _concurrent(
    limiter: SharedRateLimiter, takes: int, callers: int, one_key: bool
) -> tuple[list[float], float]:
    times: list[float] = []

    async def caller(c: int) -> None:
        for _ in range(takes // callers):
            await _timed(limiter, "hot" if one_key else f"caller-{c}", times)

    start = time.perf_counter()
    await asyncio.gather(*(caller(c) for c in range(callers)))
    return times, time.perf_counter() - start


def _in_process(takes: int, keys: int) -> list[float]:
    limiter, times = RateLimiter(RATE, BURST), []
    for n in range(takes):
        start = time.perf_counter()
        limiter.take(f"key-{n % keys}")
        times.append((time.perf_counter() - start) * 1000)
    return times


async def main(takes: int, keys: int, callers: int) -> None:
    async with bench_resources() as res:
        limiter = _limiter(res)
        await _sequential(limiter, 200, keys)  # warm: connections, statement cache
        print("| take | takes | p50 ms | p95 ms | max ms | takes/s |")
        print("|---|---|---|---|---|---|")
        print(_row(f"sequential, {keys} keys", await _sequential(limiter, takes, keys)))
        many, wall = await _concurrent(limiter, takes, callers, one_key=False)
        print(_row(f"{callers} concurrent callers, a key each", many, wall))
        hot, wall = await _concurrent(limiter, takes, callers, one_key=True)
        print(_row(f"{callers} concurrent callers, one key", hot, wall))
        print(_row("in-process bucket (the old limit)", _in_process(takes, keys)))


def _limiter(res: Resources) -> SharedRateLimiter:
    return SharedRateLimiter(res.sessions, RATE, BURST)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--takes", type=int, default=3000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--callers", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.takes, args.keys, args.callers))
