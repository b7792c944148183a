"""Forward audit-mode trajectory events from `trajectory_outbox` to an OTLP backend.

At-least-once: a batch of unsent rows is claimed with FOR UPDATE SKIP LOCKED (so several
forwarders never export the same batch at once), exported, and marked sent in the same
transaction only after the exporter reported success. A crash or failed export between
the two leaves the rows unsent; the next run exports them again. Each record carries
`agent.event.id` (and a span id derived from it), so a receiver can drop the duplicates.

Records are exported as spans named `audit {kind}`, parented under the live span they
describe when the event knows it. Run it as
`python -m durable_agents.workers.process.trajectory_forwarder`; the OTLP/HTTP exporter reads
the standard OTEL_EXPORTER_OTLP_* environment variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.trajectory import AuditEvent, AuditRecords
from durable_agents.storage.outbox import OutboxRepository

logger = logging.getLogger(__name__)

DEFAULT_BATCH = 200


class ForwardingFailed(RuntimeError):
    """The exporter did not accept a batch; its rows stay unsent for the next run."""


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
        self._records = AuditRecords(resource)

    async def forward_batch(self) -> int:
        """Export one batch of unsent events and mark them sent; returns how many."""
        async with self._sessions() as db, db.begin():
            outbox = OutboxRepository(db)
            rows = await outbox.claim_unsent(self._batch_size)
            if not rows:
                return 0
            records = [
                self._records.record(AuditEvent(r.event_id, r.kind, r.attributes, r.created_at))
                for r in rows
            ]
            # The exporter blocks (HTTP with retries): keep it off the event loop.
            result = await asyncio.to_thread(self._exporter.export, records)
            if result is not SpanExportResult.SUCCESS:
                raise ForwardingFailed(f"exporter refused a batch of {len(rows)} events")
            await outbox.mark_sent([(r.tenant_id, r.event_id) for r in rows])
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

    from durable_agents.storage.db import make_engine, make_session_factory
    from durable_agents.workers.settings import get_settings

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
