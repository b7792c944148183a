"""Swapping a workspace directory for a symlink mid-call never lets a tool escape."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.files import list_dir, read_file, write_file

SECRET = "the secret outside the workspace"
OPERATIONS = 2_000


def _flip_until(stop: threading.Event, ws: Path, outside: Path) -> int:
    """Swap ws/dir between a real directory and a symlink to `outside`, as fast as it goes."""
    flips = 0
    real, parked = ws / "dir", ws / "parked"

    def put(make: Callable[[], None]) -> None:
        # write_file may create ws/dir while it is briefly missing, as it should: that
        # directory is moved aside and the swap goes on.
        while True:
            try:
                return make()
            except OSError:
                os.rename(real, ws / f"created-in-gap-{flips}-{os.urandom(4).hex()}")

    while not stop.is_set():
        os.rename(real, parked)
        put(lambda: os.symlink(outside, real))
        os.unlink(real)
        put(lambda: os.rename(parked, real))
        flips += 1
    return flips


async def test_symlink_swaps_during_reads_writes_and_listings_never_escape(
    tmp_path: Path,
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "dir").mkdir(parents=True)
    (ws / "dir" / "f.txt").write_text("inside")
    outside.mkdir()
    (outside / "f.txt").write_text(SECRET)
    (outside / "only-outside.txt").write_text(SECRET)
    before_outside = sorted(p.name for p in outside.iterdir())

    stop = threading.Event()
    flips: list[int] = []
    flipper = threading.Thread(target=lambda: flips.append(_flip_until(stop, ws, outside)))
    flipper.start()
    escapes: list[str] = []
    unexpected: list[str] = []
    refused = 0
    try:
        for i in range(OPERATIONS):
            ctx = ToolContext(idempotency_key=f"k{i}", workspace=ws, tenant_id="t", session_id="s")
            try:
                if i % 3 == 0:
                    out = await read_file(ctx, {"path": "dir/f.txt"})
                    if SECRET.encode() in out.content:
                        escapes.append(f"read {i}")
                elif i % 3 == 1:
                    await write_file(ctx, {"path": f"dir/w{i}.txt", "content": "w"})
                else:
                    out = await list_dir(ctx, {"path": "dir"})
                    listed = [e["path"] for e in json.loads(out.content)["entries"]]
                    if "dir/only-outside.txt" in listed:
                        escapes.append(f"list {i}")
            except ToolError:
                refused += 1  # the swap was seen: a symlink or a missing directory
            except Exception as exc:  # counted, so a raw error cannot hide an escape
                unexpected.append(f"{i}: {type(exc).__name__}")
    finally:
        stop.set()
        flipper.join()

    assert escapes == []
    assert sorted(p.name for p in outside.iterdir()) == before_outside, "a write escaped"
    assert (outside / "f.txt").read_text() == SECRET
    assert unexpected == []  # every swap seen was told to the model as a ToolError
    # The race was really run: the flipper kept going and some calls met a swapped path.
    assert flips and flips[0] > 0 and refused > 0
