"""What the SDK core says about a bench worker's workflow cache, read from its Prometheus
endpoint: the sticky-cache hits and misses, runs evicted to make room, and full-history
polls (a new run, or an evicted run woken again); and the statements and commits the worker
sent to PostgreSQL, counted on its engine and served at the same endpoint.

A worker process started with BENCH_WORKER_METRICS=host:port serves the core's metrics
there (bench/parked_worker.py); the driver reads the counters before and after a phase.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Mapping

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

ENV = "BENCH_WORKER_METRICS"

# The core's counter names, with the SDK's "temporal_" prefix.
COUNTERS = {
    "temporal_sticky_cache_hit": "cache hits",
    "temporal_sticky_cache_miss": "misses",
    "temporal_sticky_cache_total_forced_eviction": "runs evicted for room",
    "temporal_workflow_task_execution_latency_count": "workflow tasks",
}
# Ours, counted by count_sql (named as given: the prefix is only for the core's own).
SQL_COUNTERS = {
    "bench_sql_statements": "SQL statements",
    "bench_sql_commits": "commits",
}


def metrics_runtime(bind_address: str) -> Runtime:
    """An SDK runtime serving its metrics at http://bind_address/metrics."""
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind_address)))


def count_sql(engine: AsyncEngine, runtime: Runtime) -> None:
    """Count every statement `engine` sends and every commit, on `runtime`'s endpoint."""
    meter = runtime.metric_meter
    statements = meter.create_counter("bench_sql_statements")
    commits = meter.create_counter("bench_sql_commits")
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *_: statements.add(1))
    event.listen(engine.sync_engine, "commit", lambda *_: commits.add(1))


def read_counters(addresses: Iterable[str]) -> dict[str, float]:
    """COUNTERS and SQL_COUNTERS summed over the workers (series of one name summed over
    their labels)."""
    totals = dict.fromkeys([*COUNTERS, *SQL_COUNTERS], 0.0)
    for address in addresses:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
            body = reply.read().decode()
        for line in body.splitlines():
            if line.startswith("#") or not line:
                continue
            name, _, value = line.rpartition(" ")
            base = name.split("{", 1)[0]
            if base in totals:
                totals[base] += float(value)
    return totals


def cache_between(before: Mapping[str, float], after: Mapping[str, float], per: int) -> str:
    """The cache counters' growth over a phase, and per session."""
    return _between(COUNTERS, before, after, per)


def sql_between(before: Mapping[str, float], after: Mapping[str, float], per: int) -> str:
    """The SQL counters' growth over a phase, and per session."""
    return _between(SQL_COUNTERS, before, after, per)


def _between(
    counters: Mapping[str, str], before: Mapping[str, float], after: Mapping[str, float], per: int
) -> str:
    parts = []
    for name, label in counters.items():
        grew = after.get(name, 0.0) - before.get(name, 0.0)
        parts.append(f"{label} {grew:.0f} ({grew / max(per, 1):.2f} per session)")
    return ", ".join(parts)
