"""The worker's artifact read cache: what it serves must be what the store would return."""

from __future__ import annotations

import uuid

import pytest

from storage.artifact_cache import ArtifactReadCache

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
