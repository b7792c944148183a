"""Process-level tracing for workers: an OTLP exporter and a TrajectoryRecorder, when asked."""

from __future__ import annotations

from datetime import timedelta

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider

from durable_agents.activities.trajectory import TrajectoryRecorder
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import TelemetrySettings


def recorder_for(
    settings: TelemetrySettings, res: Resources
) -> tuple[TrajectoryRecorder, ReplaySafeTracerProvider | None]:
    """A recorder exporting to `settings.otlp_endpoint`, or a no-op one if none is set.

    With an endpoint, the process's global tracer provider becomes the SDK's replay-safe one
    (workflow spans need it). The caller shuts the provider down on exit so buffered spans
    are flushed.
    """
    if not settings.otlp_endpoint:
        if settings.audit:
            # Audit without live export: events wait in the outbox for the forwarder. The
            # store only names tool results by URI; model payloads are not uploaded.
            recorder = TrajectoryRecorder(
                store=res.store, sessions=res.sessions, audit=True, keep_payloads=False
            )
            return recorder, None
        return TrajectoryRecorder(), None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = create_tracer_provider(
        resource=Resource.create({"service.name": settings.service_name})
    )
    endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    recorder = TrajectoryRecorder(
        tracer=provider.get_tracer("durable-agents"),
        store=res.store,
        sessions=res.sessions,
        audit=settings.audit,
        retention=timedelta(days=settings.retention_days),
    )
    return recorder, provider
