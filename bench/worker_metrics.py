"""What the SDK core says about a bench worker's workflow cache, read from its Prometheus
endpoint: the sticky-cache hits and misses, runs evicted to make room, and full-history
polls (a new run, or an evicted run woken again).

A worker process started with BENCH_WORKER_METRICS=host:port serves the core's metrics
there (bench/parked_worker.py); the driver reads the counters before and after a phase.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Mapping

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

ENV = "BENCH_WORKER_METRICS"

# The core's counter names, with the SDK's "temporal_" prefix.
COUNTERS = {
    "temporal_sticky_cache_hit": "cache hits",
    "temporal_sticky_cache_miss": "misses",
    "temporal_sticky_cache_total_forced_eviction": "runs evicted for room",
    "temporal_workflow_task_execution_latency_count": "workflow tasks",
}


def metrics_runtime(bind_address: str) -> Runtime:
    """An SDK runtime serving its metrics at http://bind_address/metrics."""
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind_address)))


def read_counters(addresses: Iterable[str]) -> dict[str, float]:
    """COUNTERS summed over the workers (series of one name summed over their labels)."""
    totals = dict.fromkeys(COUNTERS, 0.0)
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
    """The counters' growth over a phase, and per session."""
    parts = []
    for name, label in COUNTERS.items():
        grew = after[name] - before[name]
        parts.append(f"{label} {grew:.0f} ({grew / max(per, 1):.2f} per session)")
    return ", ".join(parts)
