"""Span ids chosen by us: derived from stable names, so a re-sent audit record is the very
same span.

Workflow spans get their replay-stable ids from the SDK's `TemporalIdGenerator` (the
workflow's seeded random). That works only inside a workflow; the forwarder exports outside
any, and derives each audit record's ids from its event id instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

_FORCED: ContextVar[tuple[int | None, int | None]] = ContextVar(
    "durable_agents_forced_ids", default=(None, None)
)


class ForcingIdGenerator(IdGenerator):
    """The inner generator's ids, except inside `forced_ids(...)`: then the ids given there."""

    def __init__(self, inner: IdGenerator | None = None) -> None:
        self._inner = inner or RandomIdGenerator()

    def generate_span_id(self) -> int:
        return _FORCED.get()[1] or self._inner.generate_span_id()

    def generate_trace_id(self) -> int:
        return _FORCED.get()[0] or self._inner.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        return _FORCED.get()[0] is None and self._inner.is_trace_id_random()


@contextmanager
def forced_ids(trace_id: int | None, span_id: int | None) -> Iterator[None]:
    """Spans started in this block get these ids (None: the generator's own)."""
    token = _FORCED.set((trace_id, span_id))
    try:
        yield
    finally:
        _FORCED.reset(token)


def derived_id(bits: int, *parts: str) -> int:
    """A non-zero id of `bits` bits that is a pure function of `parts`: replay computes it too."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1
