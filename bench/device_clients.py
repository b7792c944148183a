"""The simulated devices of bench/device_dispatch.py, in processes of their own so their
HTTP never starves the cloud worker that the bench runs (nor is counted as the gateway's).

Each device long-polls one gateway, alternating between them from poll to poll; on a call
it PUTs the result bytes to the call's presigned URL, completes through the other gateway,
then posts the same completion again to the one it polled (a retry: it must commit
nothing), and is done; a completion refused because its lease ran out meanwhile (an
overloaded gateway) sends it back to polling, as agentctl device does.
"""

from __future__ import annotations

import asyncio
import hashlib
from multiprocessing.connection import Connection
from typing import Any

import httpx

BODY = b"what the device read"
POLL_WAIT = 20.0


async def _device(
    http: httpx.AsyncClient, urls: list[str], n: int, key: str, tally: dict[str, Any]
) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    sha = hashlib.sha256(BODY).hexdigest()
    claim = {"size_bytes": len(BODY), "sha256": sha, "content_type": "text/plain"}
    turn = n % 2
    while True:
        turn = 1 - turn
        polled, other = urls[turn], urls[1 - turn]
        try:
            got = await http.post(
                f"{polled}/v1/device/calls/next", params={"wait": POLL_WAIT}, headers=auth
            )
            tally["polls"] += 1
            if got.status_code == 204:
                continue
            if got.status_code != 200:
                tally["refused"].append(f"poll {got.status_code}")
                await asyncio.sleep(1)
                continue
            call = got.json()
            put = await http.put(call["upload"]["url"], content=BODY)
            if put.status_code != 200:
                tally["refused"].append(f"put {put.status_code}")
                continue
            body = {"result": claim, "lease": call["lease"]}
            path = f"/v1/device/calls/{call['call_id']}/complete"
            answered = False
            for url in (other, polled):
                done = await http.post(f"{url}{path}", json=body, headers=auth)
                ok = done.status_code == 200
                status = done.json().get("status") if ok else done.status_code
                if status in ("committed", "already_committed"):
                    tally[status] += 1
                    answered = True
                else:
                    tally["refused"].append(f"complete {status}")
            if answered:
                return
            # Refused (its lease ran out meanwhile): the call is offered again; poll for it.
        except httpx.TransportError as err:
            # A timeout or a dropped connection: the lease runs out and the call comes back.
            tally["transport_errors"] += 1
            tally["refused"].append(type(err).__name__)
            await asyncio.sleep(1)


async def _run(urls: list[str], devices: list[tuple[int, str]], conn: Connection) -> None:
    tally: dict[str, Any] = {
        "committed": 0,
        "already_committed": 0,
        "polls": 0,
        "transport_errors": 0,
        "refused": [],
    }
    limits = httpx.Limits(max_connections=4 * len(devices), max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60), limits=limits) as http:
        tasks = []
        for i, (n, key) in enumerate(devices):
            tasks.append(asyncio.create_task(_device(http, urls, n, key, tally)))
            if i % 50 == 49:
                await asyncio.sleep(0.25)  # connect over a few seconds, as devices would
        conn.send("ready")
        # Until each device is done, or the bench says every call completed (a device
        # whose completion timed out after it committed polls on for nothing).
        told = asyncio.ensure_future(asyncio.to_thread(conn.recv))
        every = asyncio.ensure_future(asyncio.wait(tasks))
        await asyncio.wait([told, every], timeout=900, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.wait(tasks, timeout=10)  # second completions still in flight
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    conn.send(tally)


def run(urls: list[str], devices: list[tuple[int, str]], conn: Connection) -> None:
    """A process's devices, until each has completed its one call; its tally is sent."""
    asyncio.run(_run(urls, devices, conn))
