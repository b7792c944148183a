"""Trajectory test support: a tracer and meter of the test's own, and a traced cloud worker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from activities.providers.scripted import ScriptedProvider
from activities.tools.builtin import default_registry
from activities.trajectory import TrajectoryRecorder
from workers.cloud import build_cloud_worker, cloud_activities, running
from workers.resources import Resources
from workers.stack import StackEndpoints


class Otel:
    """A tracer and meter of this test's own, not the process-global providers."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer = provider.get_tracer("test")
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
    worker = build_cloud_worker(
        client, acts, task_queue=queue, max_cached_workflows=0, interceptors=recorder.interceptors()
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
