"""The worker's artifact read cache: what it serves must be what the store would return."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.tool_run import ToolActivities, _Result
from activities.tools.base import ToolOutput
from activities.tools.builtin import default_registry
from storage.artifact_cache import ArtifactReadCache
from storage.items import ItemRepository, NewItem
from storage.sessions import SessionRepository
from workers.resources import Resources
from workflows.contracts import ToolRunInput

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
                tool_name="read_file",
                data={"arguments": {"path": "f.txt"}},
            )
        )
    cache = ArtifactReadCache()
    tools = ToolActivities(
        resources.sessions,
        resources.store,
        default_registry(),
        workspace=tmp_path,
        read_cache=cache,
    )
    inp = ToolRunInput(str(sid), tenant, 0, "c1", "read_file", f"{sid}:0:c1")
    (tmp_path / "f.txt").write_text("first")
    first = await ActivityEnvironment().run(tools.run_tool, inp)
    assert first.ref is not None and first.ref.artifact_id is not None
    artifact_id = uuid.UUID(first.ref.artifact_id)
    assert cache.lookup(tenant, artifact_id, 100) == (b"first", first.ref.content_type)

    # An attempt racing the first one read other bytes, then found the first's commit: the
    # cache must not now claim its bytes are the committed artifact.
    fresh = ArtifactReadCache()
    tools._read_cache = fresh
    async with resources.sessions() as db:
        committed = await ItemRepository(db, tenant).by_key(inp.idempotency_key)
    assert committed is not None
    other = await resources.store.put(tenant, b"second", first.ref.content_type)
    tools._warm(tenant, committed, other, _Result(ToolOutput(b"second")))
    assert fresh.lookup(tenant, artifact_id, 100) is None
    tools._warm(tenant, committed, first.ref, _Result(ToolOutput(b"first")))
    assert fresh.lookup(tenant, artifact_id, 100) == (b"first", first.ref.content_type)
