"""Forward audit-mode trajectory events from `trajectory_outbox` to an OTLP backend.

At-least-once: a batch of unsent rows is claimed with FOR UPDATE SKIP LOCKED (so several
forwarders never export the same batch at once), exported, and marked sent in the same
transaction only after the exporter reported success. A crash or failed export between
the two leaves the rows unsent; the next run exports them again. Each record carries
`agent.event.id` (and a span id derived from it), so a receiver can drop the duplicates.

Records are exported as spans named `audit {kind}`, parented under the live span they
describe when the event knows it. Run it as `python -m workers.trajectory_forwarder`; the
OTLP/HTTP exporter reads the standard OTEL_EXPORTER_OTLP_* environment variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    set_span_in_context,
)
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from activities import telemetry as tm
from activities.telemetry_tracing import ForcingIdGenerator, derived_id, forced_ids
from storage.outbox_models import TrajectoryOutboxRow

logger = logging.getLogger(__name__)

DEFAULT_BATCH = 200


class ForwardingFailed(RuntimeError):
    """The exporter did not accept a batch; its rows stay unsent for the next run."""


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


class TrajectoryForwarder:
    """One forwarder loop per instance; run as many processes as wanted (SKIP LOCKED)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        exporter: SpanExporter,
        *,
        batch_size: int = DEFAULT_BATCH,
        resource: Resource | None = None,
    ) -> None:
        self._sessions = sessions
        self._exporter = exporter
        self._batch_size = batch_size
        self._sink = _Collect()
        # Its own provider: audit records must never be sampled away, and need chosen ids.
        provider = TracerProvider(
            sampler=ALWAYS_ON,
            resource=resource or Resource.create({"service.name": "durable-agents"}),
            id_generator=ForcingIdGenerator(),
        )
        provider.add_span_processor(self._sink)
        self._tracer = provider.get_tracer("durable_agents.trajectory_forwarder")

    def _record(self, row: TrajectoryOutboxRow) -> ReadableSpan:
        attrs = {k: v for k, v in row.attributes.items() if _attribute(v)}
        parent = _parent_context(attrs.pop(tm.PARENT, None))
        attrs[tm.EVENT_ID] = str(row.event_id)
        attrs[tm.EVENT_KIND] = row.kind
        at = int(row.created_at.timestamp() * 1_000_000_000)
        # Ids derived from the event id: a re-sent record is the very same span.
        event = str(row.event_id)
        with forced_ids(derived_id(128, "audit", event), derived_id(64, "audit", event)):
            span = self._tracer.start_span(
                tm.span_name("audit", row.kind),
                parent,
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=at,
            )
        span.end(end_time=at)
        return self._sink.spans.pop()

    async def forward_batch(self) -> int:
        """Export one batch of unsent events and mark them sent; returns how many."""
        async with self._sessions() as db, db.begin():
            rows: Sequence[TrajectoryOutboxRow] = list(
                await db.scalars(
                    select(TrajectoryOutboxRow)
                    .where(TrajectoryOutboxRow.sent_at.is_(None))
                    .order_by(TrajectoryOutboxRow.created_at, TrajectoryOutboxRow.event_id)
                    .limit(self._batch_size)
                    .with_for_update(skip_locked=True)
                )
            )
            if not rows:
                return 0
            records = [self._record(r) for r in rows]
            # The exporter blocks (HTTP with retries): keep it off the event loop.
            result = await asyncio.to_thread(self._exporter.export, records)
            if result is not SpanExportResult.SUCCESS:
                raise ForwardingFailed(f"exporter refused a batch of {len(rows)} events")
            await db.execute(
                update(TrajectoryOutboxRow)
                .where(TrajectoryOutboxRow.event_id.in_([r.event_id for r in rows]))
                .values(sent_at=func.now())
            )
            return len(rows)

    async def drain(self) -> int:
        """Forward until nothing is unsent; returns how many were sent."""
        total = 0
        while sent := await self.forward_batch():
            total += sent
        return total

    async def run(self, stop: asyncio.Event, *, interval_seconds: float = 2.0) -> None:
        """Forward until `stop` is set, waiting `interval_seconds` when idle or failing."""
        while not stop.is_set():
            try:
                await self.drain()
            except Exception:
                logger.warning("trajectory forwarder: will retry", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_seconds)


async def _main() -> None:
    import signal

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from storage.db import make_engine, make_session_factory
    from workers.settings import get_settings

    settings = get_settings()
    engine = make_engine(settings.database.url.get_secret_value(), pool_size=2)
    # Same collector as the workers; without AGENT_TRACE_OTLP_ENDPOINT the OTEL_* env applies.
    base = settings.telemetry.otlp_endpoint
    exporter: SpanExporter = OTLPSpanExporter(
        endpoint=f"{base.rstrip('/')}/v1/traces" if base else None
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await TrajectoryForwarder(make_session_factory(engine), exporter).run(stop)
    finally:
        exporter.shutdown()
        await engine.dispose()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(_main())
