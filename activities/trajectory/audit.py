"""Audit records: an outbox event as the span the forwarder exports.

A record is named `audit {kind}`, parented under the live span the event describes when
the event knows it, and has ids derived from its event id, so a re-sent record is the very
same span and a receiver can drop the duplicate.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    set_span_in_context,
)

from durable_agents.activities.trajectory import genai
from durable_agents.activities.trajectory.ids import ForcingIdGenerator, derived_id, forced_ids


@dataclass(frozen=True)
class AuditEvent:
    """One outbox row, as the forwarder read it."""

    event_id: uuid.UUID
    kind: str
    attributes: dict[str, Any]
    created_at: datetime


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _parent_context(parent: object) -> Context:
    """The live span an event describes, from "<trace hex>-<span hex>"; empty if unknown."""
    if not isinstance(parent, str) or "-" not in parent:
        return Context()
    trace_hex, span_hex = parent.split("-", 1)
    try:
        ctx = SpanContext(int(trace_hex, 16), int(span_hex, 16), True, TraceFlags(1))
    except ValueError:
        return Context()
    return set_span_in_context(NonRecordingSpan(ctx)) if ctx.is_valid else Context()


def _attribute(value: object) -> bool:
    if isinstance(value, str | bool | int | float):
        return True
    return isinstance(value, list) and all(isinstance(v, str | bool | int | float) for v in value)


class AuditRecords:
    """Builds audit records with a provider of its own: they must never be sampled away,
    and need chosen ids."""

    def __init__(self, resource: Resource | None = None) -> None:
        self._sink = _Collect()
        provider = TracerProvider(
            sampler=ALWAYS_ON,
            resource=resource or Resource.create({"service.name": "durable-agents"}),
            id_generator=ForcingIdGenerator(),
        )
        provider.add_span_processor(self._sink)
        self._tracer = provider.get_tracer("durable_agents.trajectory_forwarder")

    def record(self, ev: AuditEvent) -> ReadableSpan:
        """The span for one event; the same event always gives the same span ids."""
        attrs = {k: v for k, v in ev.attributes.items() if _attribute(v)}
        parent = _parent_context(attrs.pop(genai.PARENT, None))
        event = str(ev.event_id)
        attrs[genai.EVENT_ID] = event
        attrs[genai.EVENT_KIND] = ev.kind
        at = int(ev.created_at.timestamp() * 1_000_000_000)
        with forced_ids(derived_id(128, "audit", event), derived_id(64, "audit", event)):
            span = self._tracer.start_span(
                genai.span_name("audit", ev.kind),
                parent,
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=at,
            )
        span.end(end_time=at)
        return self._sink.spans.pop()
