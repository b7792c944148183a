"""Trajectory test support: a tracer and meter of the test's own, and a traced cloud worker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.trajectory import TrajectoryRecorder
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints


class _ToTheCurrentTest(SpanProcessor):
    """Hands each finished span to the exporter of the test running now (if any)."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            self.target.on_end(span)


_ROUTER = _ToTheCurrentTest()
_GLOBAL: ReplaySafeTracerProvider | None = None


def global_tracer_provider() -> ReplaySafeTracerProvider:
    """The process's tracer provider, the SDK's replay-safe one, as a traced worker needs it.

    OpenTelemetry lets a process set it once, so it is set once here and routes spans to
    whichever test's Otel is current.
    """
    global _GLOBAL
    if _GLOBAL is None:
        _GLOBAL = create_tracer_provider()
        _GLOBAL.add_span_processor(_ROUTER)
        trace.set_tracer_provider(_GLOBAL)
    return _GLOBAL


class Otel:
    """A tracer and meter of this test's own: the spans finished while it is current, and
    its own meter provider."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        _ROUTER.target = SimpleSpanProcessor(self.spans)
        self.tracer = global_tracer_provider().get_tracer("test")
        self.reader = InMemoryMetricReader()
        self.meter = MeterProvider(metric_readers=[self.reader]).get_meter("test")

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            p
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == metric
            for p in m.data.data_points
        ]


@asynccontextmanager
async def traced_worker(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    provider: ScriptedProvider,
    recorder: TrajectoryRecorder,
) -> AsyncIterator[str]:
    """A cloud worker (every workflow task replays) whose activities record the trajectory."""
    queue = f"test-{uuid.uuid4().hex[:10]}"
    settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
    acts = cloud_activities(settings, resources, provider, default_registry(), recorder=recorder)
    global_tracer_provider()
    worker = build_cloud_worker(
        client,
        acts,
        task_queue=queue,
        max_cached_workflows=0,
        interceptors=recorder.interceptors(),
        plugins=recorder.plugins(),
    )
    async with running(worker):
        yield queue


async def waiting(otel: Otel, expected: int) -> int:
    """The approvals-waiting gauge, once it shows `expected` (or after 10 s)."""
    for _ in range(200):
        value = sum(p.value for p in otel.points("agent.approvals.waiting"))
        if value == expected:
            break
        await asyncio.sleep(0.05)
    return int(value)


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} has no parent"
    found = [s for s in spans if s.context.span_id == span.parent.span_id]
    assert len(found) == 1, f"parent of {span.name} not exported exactly once"
    return found[0]
