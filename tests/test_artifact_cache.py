"""The worker's artifact read cache: what it serves must be what the store would return."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry
from durable_agents.storage.artifact_cache import ArtifactReadCache
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ToolRunInput

T = "tenant-a"


def test_a_whole_object_serves_any_read_and_a_prefix_only_shorter_ones() -> None:
    cache = ArtifactReadCache(1_000)
    whole, prefix = uuid.uuid4(), uuid.uuid4()
    cache.keep(T, whole, b"0123456789", "text/plain", complete=True)
    cache.keep(T, prefix, b"abcdef", "text/plain", complete=False)

    assert cache.lookup(T, whole, 100) == (b"0123456789", "text/plain")
    assert cache.lookup(T, whole, 4) == (b"0123", "text/plain")  # a ranged read's answer
    assert cache.lookup(T, prefix, 6) == (b"abcdef", "text/plain")
    assert cache.lookup(T, prefix, 3) == (b"abc", "text/plain")
    assert cache.lookup(T, prefix, 7) is None  # the store has more than the cache knows
    assert cache.lookup("tenant-b", whole, 100) is None  # tenants never share entries
    assert (cache.hits, cache.misses) == (4, 2)


def test_a_longer_read_replaces_a_shorter_prefix_but_never_the_reverse() -> None:
    cache = ArtifactReadCache(1_000)
    aid = uuid.uuid4()
    cache.keep(T, aid, b"abc", "text/plain", complete=False)
    cache.keep(T, aid, b"abcdefgh", "text/plain", complete=True)
    cache.keep(T, aid, b"ab", "text/plain", complete=False)
    assert cache.lookup(T, aid, 100) == (b"abcdefgh", "text/plain")
    assert cache.size_bytes == 8


def test_least_recently_used_entries_go_first_and_huge_ones_are_not_kept() -> None:
    cache = ArtifactReadCache(100)
    a, b, c, huge = (uuid.uuid4() for _ in range(4))
    cache.keep(T, a, b"a" * 12, "text/plain", complete=True)
    cache.keep(T, b, b"b" * 12, "text/plain", complete=True)
    assert cache.lookup(T, a, 100) is not None  # a is now the most recent
    cache.keep(T, c, b"c" * 12, "text/plain", complete=True)
    cache.keep(T, huge, b"h" * 13, "text/plain", complete=True)  # over 1/8 of it
    assert cache.lookup(T, huge, 100) is None
    for _ in range(6):  # 9 entries of 12 bytes: one must go, the least recently used
        cache.keep(T, uuid.uuid4(), b"x" * 12, "text/plain", complete=True)
    assert cache.size_bytes == 96
    assert cache.lookup(T, b, 100) is None
    assert cache.lookup(T, a, 100) is not None and cache.lookup(T, c, 100) is not None


def test_a_negative_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity_bytes"):
        ArtifactReadCache(-1)


def _gated_tool(
    content: bytes, gate: asyncio.Event | None = None, entered: asyncio.Event | None = None
) -> Tool:
    """Returns `content`; with a gate, says it `entered` and waits for the gate to open."""

    async def gated(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        if entered is not None:
            entered.set()
        if gate is not None:
            await gate.wait()
        return ToolOutput(content)

    # Read-only: two racing attempts both run it (an effectful one's second would be in doubt).
    spec = ToolSpec(name="gated", description="", parameters={"type": "object"})
    return Tool(spec, gated, effect="read_only")


async def test_run_tool_warms_the_cache_only_with_the_bytes_it_committed(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        await ItemRepository(db, tenant).append(
            NewItem(
                sid,
                "tool_call",
                "assistant",
                f"{sid}:0:call",
                tool_call_id="c1",
                tool_name="gated",
                data={"arguments": {}},
            )
        )

    def attempt(tool: Tool, cache: ArtifactReadCache) -> ToolActivities:
        registry = ToolRegistry.of([tool])
        return ToolActivities(
            resources.sessions, resources.store, registry, workspace=tmp_path, read_cache=cache
        )

    inp = ToolRunInput(str(sid), tenant, 0, "c1", "gated", f"{sid}:0:c1")
    # Two attempts of one call: the late one is held in its tool while the first commits,
    # then reads other bytes and finds the first's commit.
    gate, entered = asyncio.Event(), asyncio.Event()
    late_cache, first_cache = ArtifactReadCache(), ArtifactReadCache()
    held = attempt(_gated_tool(b"second", gate, entered), late_cache)
    late = asyncio.create_task(ActivityEnvironment().run(held.run_tool, inp))
    await entered.wait()  # the late attempt is past its by_key check, inside the tool
    first = await ActivityEnvironment().run(
        attempt(_gated_tool(b"first"), first_cache).run_tool, inp
    )
    gate.set()
    late_outcome = await late
    assert first.ref is not None and first.ref.artifact_id is not None
    assert late_outcome.ref == first.ref  # the late attempt reports the committed result
    artifact_id = uuid.UUID(first.ref.artifact_id)
    assert first_cache.lookup(tenant, artifact_id, 100) == (b"first", first.ref.content_type)
    # ...but must not claim its own bytes are the committed artifact.
    assert late_cache.lookup(tenant, artifact_id, 100) is None
