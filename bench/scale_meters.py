"""Meters for bench/scale_costs.py: what one phase of work cost in Temporal, PostgreSQL and S3.

Every number here is a count or a byte total read from the system itself, never a timing:

- S3: an event hook on the process's S3 client counts every HTTP request sent (retries too)
  by operation, with the bytes sent (request bodies) and received (GetObject bodies).
- PostgreSQL: per table, the exact row count, the logical row bytes (sum of pg_column_size
  of each row) and the on-disk bytes (pg_total_relation_size: heap, TOAST and indexes);
  rows inserted/updated/deleted from pg_stat_user_tables, transactions committed, and
  WAL bytes (pg_current_wal_lsn) as the write volume a replica or a backup must carry.
- Temporal: the dev server's own `action` counter (Prometheus, by action_type), and, from
  each workflow's history, the events, the server's history_size_bytes and the billable
  actions as Temporal Cloud's documentation defines them (see `history_actions`).
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

# -- S3 -----------------------------------------------------------------------------------------

# S3 price classes: PUT, COPY, POST and LIST requests are billed at one rate, GET, HEAD and
# the rest at a lower one; DELETE is free (Amazon S3 pricing, "Requests & data retrievals").
S3_PUT_CLASS = {
    "PutObject",
    "CreateMultipartUpload",
    "UploadPart",
    "CompleteMultipartUpload",
    "CopyObject",
    "ListObjectsV2",
    "ListObjects",
    "ListMultipartUploads",
    "ListParts",
}
S3_FREE = {"DeleteObject", "DeleteObjects", "AbortMultipartUpload"}


@dataclass
class S3Counts:
    requests: Counter[str] = field(default_factory=Counter)
    bytes_sent: int = 0
    bytes_received: int = 0

    def minus(self, other: S3Counts) -> S3Counts:
        return S3Counts(
            self.requests - other.requests,
            self.bytes_sent - other.bytes_sent,
            self.bytes_received - other.bytes_received,
        )

    def copy(self) -> S3Counts:
        return S3Counts(Counter(self.requests), self.bytes_sent, self.bytes_received)

    @property
    def put_class(self) -> int:
        return sum(n for op, n in self.requests.items() if op in S3_PUT_CLASS)

    @property
    def get_class(self) -> int:
        return sum(
            n for op, n in self.requests.items() if op not in S3_PUT_CLASS and op not in S3_FREE
        )


class S3Meter:
    """Counts the requests an aiobotocore S3 client sends, from the client's own events."""

    def __init__(self, client: Any) -> None:
        self.counts = S3Counts()
        self._paused = 0
        events = client.meta.events
        events.register("before-send.s3", self._sent)
        events.register("after-call.s3", self._answered)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The bench's own reads (bucket listings) are not the system's work."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def snapshot(self) -> S3Counts:
        return self.counts.copy()

    def _sent(self, request: Any, event_name: str, **_: Any) -> None:
        if self._paused:
            return
        self.counts.requests[event_name.rsplit(".", 1)[-1]] += 1
        body = request.body
        if isinstance(body, bytes | bytearray):
            self.counts.bytes_sent += len(body)
        else:
            self.counts.bytes_sent += int(request.headers.get("Content-Length", 0) or 0)

    def _answered(self, parsed: Any, model: Any, **_: Any) -> None:
        if self._paused or model.name != "GetObject" or not isinstance(parsed, dict):
            return
        self.counts.bytes_received += int(parsed.get("ContentLength") or 0)


async def bucket_totals(store: Any, meter: S3Meter) -> tuple[int, int]:
    """(objects, bytes) in the bucket, listed without being counted as the system's work."""
    s3, objects, total = store.client, 0, 0
    token: dict[str, Any] = {}
    with meter.paused():
        while True:
            page = await s3.list_objects_v2(Bucket=store.bucket, **token)
            contents = page.get("Contents", [])
            objects += len(contents)
            total += sum(o["Size"] for o in contents)
            if not page.get("IsTruncated"):
                return objects, total
            token = {"ContinuationToken": page["NextContinuationToken"]}


# -- PostgreSQL ---------------------------------------------------------------------------------

TABLES_SQL = (
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> 'alembic_version'"
    " ORDER BY 1"
)


@dataclass
class TableState:
    rows: int
    row_bytes: int  # sum of pg_column_size(row): the data, without page and index overhead
    disk_bytes: int  # pg_total_relation_size: heap + TOAST + indexes, in 8 KiB pages
    inserted: int
    updated: int
    deleted: int


@dataclass
class PgState:
    tables: dict[str, TableState]
    commits: int
    wal_bytes: int

    def minus(self, other: PgState) -> PgState:
        tables = {}
        for name, t in self.tables.items():
            o = other.tables.get(name, TableState(0, 0, 0, 0, 0, 0))
            tables[name] = TableState(
                t.rows - o.rows,
                t.row_bytes - o.row_bytes,
                t.disk_bytes - o.disk_bytes,
                t.inserted - o.inserted,
                t.updated - o.updated,
                t.deleted - o.deleted,
            )
        return PgState(tables, self.commits - other.commits, self.wal_bytes - other.wal_bytes)

    def total(self, attr: str) -> int:
        return sum(getattr(t, attr) for t in self.tables.values())


async def pg_state(owner: AsyncEngine, workers: AsyncEngine | None = None) -> PgState:
    """Every table of our schema, read as the owner. `workers`' pooled connections are closed
    first: a backend reports its row counters when it exits (or only every ~10 s when idle)."""
    if workers is not None:
        await workers.dispose()
    await asyncio.sleep(0.5)  # the closed backends' last report lands
    async with owner.connect() as conn:
        await conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        names = [str(n) for n in (await conn.execute(text(TABLES_SQL))).scalars()]
        stats = {
            str(r[0]): (int(r[1]), int(r[2]), int(r[3]))
            for r in await conn.execute(
                text(
                    "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"
                    " WHERE schemaname = 'public'"
                )
            )
        }
        tables = {}
        for name in names:
            # Table names come from the catalog, not from input.
            rows, row_bytes = (
                await conn.execute(
                    text(f'SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM "{name}" t')
                )
            ).one()
            disk = await conn.scalar(text(f"SELECT pg_total_relation_size('\"{name}\"')"))
            ins, upd, dele = stats.get(name, (0, 0, 0))
            tables[name] = TableState(int(rows), int(row_bytes), int(disk or 0), ins, upd, dele)
        commits = await conn.scalar(
            text("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        )
        wal = await conn.scalar(text("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))
    return PgState(tables, int(commits or 0), int(wal or 0))


async def vacuum_full(owner: AsyncEngine, tables: list[str]) -> None:
    """Give deleted rows' pages back, so on-disk bytes after archive mean something."""
    async with owner.connect() as conn:
        auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
        for name in tables:
            await auto.execute(text(f'VACUUM FULL "{name}"'))


# -- Temporal -----------------------------------------------------------------------------------

_ACTION_LINE = re.compile(r"^action\{([^}]*)\}\s+([0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def server_actions(metrics_port: int, namespace: str = "default") -> Counter[str]:
    """The dev server's `action` counter for one namespace, by action_type."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    with opener.open(url, timeout=10) as response:
        body = response.read().decode()
    out: Counter[str] = Counter()
    for line in body.splitlines():
        m = _ACTION_LINE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group(1)))
        if labels.get("namespace") == namespace:
            out[labels.get("action_type", "?")] += int(float(m.group(2)))
    return out


async def settled_actions(metrics_port: int, namespace: str = "default") -> Counter[str]:
    """server_actions once it stops moving: the server reports its counters with a delay
    (about a second), so a reading taken right after the work would miss its last actions."""
    last = await asyncio.to_thread(server_actions, metrics_port, namespace)
    for _ in range(20):
        await asyncio.sleep(1.5)
        now = await asyncio.to_thread(server_actions, metrics_port, namespace)
        if now == last:
            return now
        last = now
    return last


@dataclass
class HistoryCost:
    runs: int = 0
    events: int = 0
    bytes: int = 0
    workflow_tasks: int = 0
    activity_tasks: int = 0  # attempts: each start or retry is an action
    actions: Counter[str] = field(default_factory=Counter)
    event_types: Counter[str] = field(default_factory=Counter)

    def add(self, other: HistoryCost) -> None:
        self.runs += other.runs
        self.events += other.events
        self.bytes += other.bytes
        self.workflow_tasks += other.workflow_tasks
        self.activity_tasks += other.activity_tasks
        self.actions.update(other.actions)
        self.event_types.update(other.event_types)

    @property
    def total_actions(self) -> int:
        return sum(self.actions.values())


def history_actions(events: Any) -> tuple[Counter[str], int, int]:
    """Billable actions in one run's history, per Temporal Cloud's "Actions" page
    (docs.temporal.io/cloud/actions): workflow started (incl. continue-as-new), each activity
    start or retry (the started event's attempt number), timer started, signal, accepted
    update, search-attribute upsert, child workflow (2), and markers (side effects, local
    activities, patches) at most one per workflow task. Workflow tasks themselves are not
    actions. Queries and activity heartbeats are actions too but never appear in history:
    the server's `action` counter has them. Returns (actions, workflow tasks, activity tasks).
    """
    actions: Counter[str] = Counter()
    wft = act = 0
    marker_tasks: set[int] = set()
    for e in events:
        t = e.event_type
        if t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            actions["workflow started"] += 1
        elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            wft += 1
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attempts = max(1, e.activity_task_started_event_attributes.attempt)
            act += attempts
            actions["activity started/retried"] += attempts
        elif t == EventType.EVENT_TYPE_TIMER_STARTED:
            actions["timer started"] += 1
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            actions["signal"] += 1
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            actions["update"] += 1
        elif t == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            actions["search attributes upsert"] += 1
        elif t == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            actions["child workflow"] += 2
        elif t == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker_tasks.add(e.marker_recorded_event_attributes.workflow_task_completed_event_id)
        elif t == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
            actions["signal"] += 1
    if marker_tasks:
        actions["markers (one per workflow task)"] += len(marker_tasks)
    return actions, wft, act


async def workflow_cost(client: Client, workflow_id: str) -> HistoryCost:
    """Events, bytes and actions of a workflow, over its continue-as-new chain."""
    cost = HistoryCost()
    handle = client.get_workflow_handle(workflow_id)
    desc = await handle.describe()
    run_id: str | None = desc.raw_description.workflow_execution_info.first_run_id or desc.run_id
    while run_id:
        h = client.get_workflow_handle(workflow_id, run_id=run_id)
        d = await h.describe()
        history = await h.fetch_history()
        actions, wft, act = history_actions(history.events)
        cost.runs += 1
        cost.events += len(history.events)
        cost.bytes += d.raw_description.workflow_execution_info.history_size_bytes
        cost.workflow_tasks += wft
        cost.activity_tasks += act
        cost.actions.update(actions)
        cost.event_types.update(EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
                                for e in history.events)  # fmt: skip
        run_id = None
        for e in history.events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                run_id = e.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return cost
