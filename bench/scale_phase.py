"""One phase of bench/scale_costs.py as flat, named counters, and the tables it prints.

A reading is every counter of bench/scale_meters.py flattened into one dict
("pg.items.rows", "s3.req.PutObject", "temporal.server.<action_type>", ...), so a phase is
two readings subtracted, a per-step cost is two phases subtracted, and printing is generic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scale_meters import S3_FREE, S3_PUT_CLASS, HistoryCost, PgState, S3Counts


def flat_reading(
    pg: PgState,
    s3: S3Counts,
    bucket: tuple[int, int],
    actions: dict[str, int],
    cpu: dict[str, float],
    disk: dict[str, int],
) -> dict[str, float]:
    """`cpu`: CPU seconds per process group (bench/proc_stats.py); `disk`: allocated bytes
    per store (bench/stack_disk.py)."""
    v: dict[str, float] = {**_cpu_ms(cpu), **_disk_bytes(disk)}
    for name, t in pg.tables.items():
        for attr in ("rows", "row_bytes", "disk_bytes", "inserted", "updated", "deleted"):
            v[f"pg.{name}.{attr}"] = getattr(t, attr)
    v["pg.commits"] = pg.commits
    v["pg.wal_bytes"] = pg.wal_bytes
    for op, n in s3.requests.items():
        v[f"s3.req.{op}"] = n
    v["s3.bytes_sent"] = s3.bytes_sent
    v["s3.bytes_received"] = s3.bytes_received
    v["s3.bucket_objects"], v["s3.bucket_bytes"] = bucket
    for kind, n in actions.items():
        v[f"temporal.server.{kind}"] = n
    return v


def _cpu_ms(by_group: dict[str, float]) -> dict[str, float]:
    """CPU milliseconds per process group. The cloud worker runs in the bench's own process
    ("client" there), so its CPU is the worker's and the bench's."""
    names = {"client": "worker", "weed": "s3"}
    return {
        f"cpu.{names.get(group, group)}_ms": secs * 1000
        for group, secs in by_group.items()
        if group != "worker"  # no worker process of its own here
    }


def _disk_bytes(disk: dict[str, int]) -> dict[str, float]:
    return {f"disk.{store.replace(' ', '_')}": float(n) for store, n in disk.items()}


def flat_history(h: HistoryCost) -> dict[str, float]:
    v: dict[str, float] = {
        "history.runs": h.runs,
        "history.events": h.events,
        "history.bytes": h.bytes,
        "history.workflow_tasks": h.workflow_tasks,
        "history.activity_tasks": h.activity_tasks,
        "history.actions": h.total_actions,
    }
    for kind, n in h.actions.items():
        v[f"history.action.{kind}"] = n
    return v


def _sub(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    keys = set(a) | set(b)
    return {k: a.get(k, 0) - b.get(k, 0) for k in sorted(keys) if a.get(k, 0) != b.get(k, 0)}


@dataclass
class Reading:
    values: dict[str, float]

    def since(self, before: Reading, name: str, units: int, unit: str) -> Phase:
        return Phase(name, units, unit, _sub(self.values, before.values))


@dataclass
class Phase:
    """Counter deltas of one phase; `units` (steps or sessions) is what per-unit divides by."""

    name: str
    units: float
    unit: str
    values: dict[str, float]
    wall_s: float = 0.0
    workflow_ids: list[str] = field(default_factory=list)

    def add_history(self, h: HistoryCost) -> None:
        for k, n in flat_history(h).items():
            self.values[k] = self.values.get(k, 0) + n

    def minus(self, other: Phase, name: str, units: float) -> Phase:
        return Phase(name, units, self.unit, _sub(self.values, other.values))

    def plus(self, other: Phase, name: str) -> Phase:
        keys = set(self.values) | set(other.values)
        values = {k: self.values.get(k, 0) + other.values.get(k, 0) for k in sorted(keys)}
        return Phase(name, self.units, self.unit, {k: n for k, n in values.items() if n})

    def scaled(self, factor: float) -> Phase:
        values = {k: n * factor for k, n in self.values.items()}
        return Phase(self.name, self.units * factor, self.unit, values)

    def per(self, key: str) -> float:
        return self.values.get(key, 0) / max(self.units, 1e-9)

    def sum_per(self, prefix: str, suffix: str = "") -> float:
        total = sum(
            n for k, n in self.values.items() if k.startswith(prefix) and k.endswith(suffix)
        )
        return total / max(self.units, 1e-9)

    def s3_class_per(self, put: bool) -> float:
        total = 0.0
        for k, n in self.values.items():
            if not k.startswith("s3.req."):
                continue
            op = k.removeprefix("s3.req.")
            if op in S3_FREE:
                continue
            if (op in S3_PUT_CLASS) == put:
                total += n
        return total / max(self.units, 1e-9)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "units": self.units, "unit": self.unit,
                "wall_s": round(self.wall_s, 2), "values": self.values}  # fmt: skip


def _n(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 or x == int(x) else f"{x:,.2f}"


def phase_text(p: Phase) -> str:
    """Everything a phase changed, per unit, grouped by system."""
    lines = [f"\n== {p.name}  (per {p.unit}, over {_n(p.units)}; wall {p.wall_s:.1f} s)"]
    groups: dict[str, list[str]] = {}
    for k in sorted(p.values):
        head = k.split(".", 1)[0]
        groups.setdefault(head, []).append(f"{k.split('.', 1)[1]}={_n(p.per(k))}")
    for head, items in groups.items():
        lines.append(f"  {head}: " + ", ".join(items))
    return "\n".join(lines)


HEARTBEATS = "temporal.server.grpc_RecordActivityTaskHeartbeat"


def cloud_actions(p: Phase) -> float:
    """Temporal Cloud's billable actions: those in history, plus the activity heartbeats that
    reached the server (its own counter) and the queries answered (counted by the bench)."""
    return p.per("history.actions") + p.per(HEARTBEATS) + p.per("temporal.queries")


SUMMARY_COLUMNS: list[tuple[str, Any]] = [
    ("history B", lambda p: p.per("history.bytes")),
    ("events", lambda p: p.per("history.events")),
    ("WF tasks", lambda p: p.per("history.workflow_tasks")),
    ("actions (history)", lambda p: p.per("history.actions")),
    ("actions (server)", lambda p: p.sum_per("temporal.server.")),
    ("heartbeats", lambda p: p.per(HEARTBEATS)),
    ("Cloud actions", lambda p: cloud_actions(p)),
    ("PG rows", lambda p: p.sum_per("pg.", ".rows")),
    ("PG row B", lambda p: p.sum_per("pg.", ".row_bytes")),
    ("PG disk B", lambda p: p.sum_per("pg.", ".disk_bytes")),
    ("PG ins/upd/del", lambda p: "/".join(_n(p.sum_per("pg.", f".{a}"))
                                          for a in ("inserted", "updated", "deleted"))),
    ("PG commits", lambda p: p.per("pg.commits")),
    ("WAL B", lambda p: p.per("pg.wal_bytes")),
    ("S3 PUT-class", lambda p: p.s3_class_per(True)),
    ("S3 GET-class", lambda p: p.s3_class_per(False)),
    ("S3 B sent/recv", lambda p: f"{_n(p.per('s3.bytes_sent'))}/{_n(p.per('s3.bytes_received'))}"),
    ("bucket B", lambda p: p.per("s3.bucket_bytes")),
    ("Temporal disk B", lambda p: p.per("disk.temporal")),
    ("CPU ms worker/Temporal/PG/S3", lambda p: "/".join(
        f"{p.per(f'cpu.{g}_ms'):.1f}" for g in ("worker", "temporal", "postgres", "s3"))),
]  # fmt: skip


def summary(phases: list[Phase]) -> str:
    head = "| phase | per | " + " | ".join(name for name, _ in SUMMARY_COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(SUMMARY_COLUMNS) + 2)]
    for p in phases:
        cells = []
        for _, fn in SUMMARY_COLUMNS:
            value = fn(p)
            cells.append(value if isinstance(value, str) else _n(value))
        lines.append(f"| {p.name} | {p.unit} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tables_text(p: Phase) -> str:
    """Per PostgreSQL table: rows, row bytes and disk bytes per unit (tables that changed)."""
    tables = sorted(
        {k.split(".")[1] for k in p.values if k.startswith("pg.") and k.count(".") == 2}
    )
    lines = [f"  {p.name} — per {p.unit}: table rows / row B / disk B / ins / upd / del"]
    for t in tables:
        cells = [_n(p.per(f"pg.{t}.{a}")) for a in
                 ("rows", "row_bytes", "disk_bytes", "inserted", "updated", "deleted")]  # fmt: skip
        lines.append(f"    {t}: " + " / ".join(cells))
    return "\n".join(lines)
