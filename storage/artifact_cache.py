"""A worker's memory of artifact bytes it has read for context assembly.

Every model step re-expands the newest tool results, and without this each step would read
the same objects from S3 again (in the loop benchmark: ~20 GETs and ~150 ms per step).
Artifacts are immutable — an artifact id names one (tenant, sha256) forever — so what was
read once can be served again without asking the store or the database. The cache holds
whole objects (read and hash-checked by `ArtifactStore.get`) and prefixes (ranged reads for
excerpts), bounded in total bytes, least recently used out first.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass

DEFAULT_CAPACITY_BYTES = 64 * 1024 * 1024
# One entry may use at most this share of the capacity: a few huge results must not evict
# every other session's working set.
_MAX_ENTRY_SHARE = 8


@dataclass(frozen=True)
class _Entry:
    data: bytes
    content_type: str
    complete: bool  # the whole object, not a prefix


class ArtifactReadCache:
    def __init__(self, capacity_bytes: int = DEFAULT_CAPACITY_BYTES) -> None:
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[tuple[str, uuid.UUID], _Entry] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def lookup(
        self, tenant_id: str, artifact_id: uuid.UUID, max_bytes: int
    ) -> tuple[bytes, str] | None:
        """What a read of at most `max_bytes` would return, if it is known: the whole object
        when it fits, else its first `max_bytes` bytes."""
        key = (tenant_id, artifact_id)
        entry = self._entries.get(key)
        if entry is None or (not entry.complete and len(entry.data) < max_bytes):
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        data = entry.data if len(entry.data) <= max_bytes else entry.data[:max_bytes]
        return data, entry.content_type

    def whole(self, tenant_id: str, artifact_id: uuid.UUID) -> bytes | None:
        """The whole object, if it is known (a prefix is not)."""
        key = (tenant_id, artifact_id)
        entry = self._entries.get(key)
        if entry is None or not entry.complete:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry.data

    def keep(
        self,
        tenant_id: str,
        artifact_id: uuid.UUID,
        data: bytes,
        content_type: str,
        *,
        complete: bool,
    ) -> None:
        if len(data) * _MAX_ENTRY_SHARE > self.capacity_bytes:
            return
        key = (tenant_id, artifact_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old.data)
            if old.complete or len(old.data) > len(data):
                data, complete = old.data, old.complete  # never replace more with less
        self._entries[key] = _Entry(data, content_type, complete)
        self._bytes += len(data)
        while self._bytes > self.capacity_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= len(evicted.data)
