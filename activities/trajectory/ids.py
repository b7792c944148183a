"""Span ids chosen by us: derived from stable names, so a replayed workflow task or a
re-sent audit record computes the same span.

The SDK's `TemporalIdGenerator` draws ids from the workflow's seeded random, which is
deterministic only inside a workflow. Ours must also be computable outside one: the
forwarder derives an audit record's ids from its event id, and the `invoke_agent` span is
emitted through an extern function (outside the sandbox) with ids every workflow task of
the run computed beforehand from workflow id and run id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import opentelemetry.sdk.trace as sdk_trace
from opentelemetry import trace
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


def can_force_ids(tracer: trace.Tracer) -> bool:
    """Wrap an SDK tracer's id generator (once); False for tracers that have none."""
    if not isinstance(tracer, sdk_trace.Tracer):
        return False
    if not isinstance(tracer.id_generator, ForcingIdGenerator):
        tracer.id_generator = ForcingIdGenerator(tracer.id_generator)
    return True


def derived_id(bits: int, *parts: str) -> int:
    """A non-zero id of `bits` bits that is a pure function of `parts`: replay computes it too."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1
