"""SSE fan-out: N clients on one gateway process following M live sessions.

A real `agentctl gateway` process on a throwaway embedded stack; this process opens the SSE
clients (httpx) and commits items to the sessions at a steady rate (through ItemRepository,
as activities do), recording each commit's time. Reported: the gateway's memory per client,
the delay from commit to each client (p50/p99), and whether any client lost or repeated an
event (each must see ordinals 1..K exactly once, in order).

    cd bench && ../.venv/bin/python sse_fanout.py --clients 500 --sessions 50 --items 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from proc_stats import proc_mem_kib
from throwaway_stack import bench_stack

from storage.api_keys import ApiKeyRepository
from storage.item_kinds import ItemKind
from storage.items import ItemRepository, NewItem
from storage.session_status import SessionStatus
from storage.sessions import SessionRepository
from workers.resources import Resources

AGENTCTL = Path(sys.executable).parent / "agentctl"
TENANT = "bench"


async def _wait_up(url: str) -> None:
    async with httpx.AsyncClient(timeout=2) as http, asyncio.timeout(60):
        while True:
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def _follow(
    http: httpx.AsyncClient, sid: str, seen: list[tuple[int, float]], ready: asyncio.Event
) -> None:
    async with http.stream("GET", f"/v1/sessions/{sid}/events") as response:
        response.raise_for_status()
        event: dict[str, str] = {}
        async for line in response.aiter_lines():
            if not line:
                if event.get("event") == "item":
                    seen.append((int(event["id"]), time.time()))
                elif event.get("event") == "status":
                    ready.set()
                elif event.get("event") == "end":
                    return
                event = {}
            elif not line.startswith(":"):
                field, _, value = line.partition(":")
                event[field] = value.removeprefix(" ")


async def _write(
    res: Resources, sids: list[str], items: int, rate: float, commits: dict[tuple[str, int], float]
) -> None:
    """`items` per session, round-robin over the sessions, `rate` commits per second."""
    gap = 1.0 / rate
    for n in range(items):
        for sid in sids:
            started = time.monotonic()
            async with res.sessions() as db, db.begin():
                row, _ = await ItemRepository(db, TENANT).append(
                    NewItem(
                        session_id=uuid.UUID(sid),
                        kind=ItemKind.USER_MESSAGE,
                        role="user",
                        idempotency_key=f"bench:{sid}:{n}",
                        text=f"message {n}",
                    )
                )
            commits[(sid, row.ordinal)] = time.time()
            await asyncio.sleep(max(0.0, gap - (time.monotonic() - started)))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_stack() as (ep, res, _):
        sids = [str(uuid.uuid4()) for _ in range(args.sessions)]
        async with res.sessions() as db, db.begin():
            for sid in sids:
                await SessionRepository(db, TENANT).create(
                    uuid.UUID(sid), title="bench", model_config={}
                )
                await SessionRepository(db, TENANT).set_status(
                    uuid.UUID(sid), SessionStatus.RUNNING
                )
            key = (await ApiKeyRepository(db).create(TENANT, "bench", ["read"])).key
        env = {
            **os.environ,
            **ep.env(),
            "GATEWAY_RATE_PER_SECOND": "100000",
            "GATEWAY_BURST": "100000",
        }
        gateway = subprocess.Popen(  # noqa: ASYNC220 (started once, before any timing)
            [str(AGENTCTL), "gateway", "--port", str(args.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{args.port}"
        try:
            await _wait_up(url)
            base_kib = proc_mem_kib(gateway.pid)[0]
            limits = httpx.Limits(max_connections=args.clients + 10, max_keepalive_connections=0)
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(
                base_url=url, headers=headers, limits=limits, timeout=None
            ) as http:
                seen: list[list[tuple[int, float]]] = [[] for _ in range(args.clients)]
                readies = [asyncio.Event() for _ in range(args.clients)]
                followed = [sids[i % len(sids)] for i in range(args.clients)]
                clients = [
                    asyncio.create_task(_follow(http, followed[i], seen[i], readies[i]))
                    for i in range(args.clients)
                ]
                async with asyncio.timeout(120):
                    await asyncio.gather(*(r.wait() for r in readies))
                connected_kib = proc_mem_kib(gateway.pid)[0]
                commits: dict[tuple[str, int], float] = {}
                started = time.monotonic()
                await _write(res, sids, args.items, args.rate, commits)
                wrote = time.monotonic() - started
                async with res.sessions() as db, db.begin():
                    for sid in sids:
                        await SessionRepository(db, TENANT).set_status(
                            uuid.UUID(sid), SessionStatus.COMPLETED
                        )
                async with asyncio.timeout(120):
                    await asyncio.gather(*clients)
                peak_kib = proc_mem_kib(gateway.pid)[1]
        finally:
            gateway.terminate()
            gateway.wait(10)
    delays, lost, repeated = [], 0, 0
    for i, events in enumerate(seen):
        ordinals = [o for o, _ in events]
        expected = list(range(1, args.items + 1))
        repeated += len(ordinals) - len(set(ordinals))
        lost += len(set(expected) - set(ordinals))
        for ordinal, at in events:
            delays.append((at - commits[(followed[i], ordinal)]) * 1000)
    delays.sort()
    return {
        "clients": args.clients,
        "sessions": args.sessions,
        "events_expected": args.clients * args.items,
        "events_received": sum(len(e) for e in seen),
        "lost": lost,
        "repeated": repeated,
        "commit_rate_per_s": round(args.sessions * args.items / wrote, 1),
        "delay_ms_p50": round(statistics.median(delays), 1),
        "delay_ms_p99": round(delays[int(len(delays) * 0.99) - 1], 1),
        "delay_ms_max": round(delays[-1], 1),
        "gateway_rss_mib_idle": round(base_kib / 1024, 1),
        "gateway_rss_mib_connected": round(connected_kib / 1024, 1),
        "gateway_kib_per_client": round((connected_kib - base_kib) / args.clients, 1),
        "gateway_rss_mib_peak": round(peak_kib / 1024, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--items", type=int, default=20, help="items committed per session")
    parser.add_argument(
        "--rate", type=float, default=100.0, help="commits per second, all sessions"
    )
    parser.add_argument("--port", type=int, default=18321)
    for key, value in asyncio.run(main(parser.parse_args())).items():
        print(f"{key}: {value}")
