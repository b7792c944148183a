"""Audit mode against a real OTLP receiver (rotel, from its PyPI wheel): events are committed
with the items they describe, the forwarder delivers every one once the receiver is back,
and a crash between export and mark re-sends, never loses (duplicates carry their event id)."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import rotel  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from sqlalchemy import select
from temporalio.client import Client

from durable_agents.activities import trajectory as tm
from durable_agents.activities.providers.scripted import ScriptedProvider, ScriptedTurn
from durable_agents.activities.trajectory import (
    AuditEvent,
    AuditRecords,
    TrajectoryRecorder,
    event_id,
)
from durable_agents.storage.outbox_models import TrajectoryOutboxRow
from durable_agents.workers.process.tracing import recorder_for
from durable_agents.workers.process.trajectory_forwarder import (
    ForwardingFailed,
    TrajectoryForwarder,
)
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import TelemetrySettings
from durable_agents.workers.stack import StackEndpoints, free_port
from tests.support.helpers import items_of, session_root, start
from tests.support.trajectory import traced_worker

ROTEL = Path(rotel.__file__).parent / "rotel-agent"
MARK = "AUDIT-MARK-5d2e71"
_EVENT_LINE = re.compile(r"agent\.event\.id: Str\(([0-9a-f-]{36})\)")


class Receiver:
    """rotel on its own ports, printing every span it receives (blackhole exporter)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.port = free_port()
        self.log = workdir / "rotel.out"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def start(self) -> None:
        args = [str(ROTEL), "start", "--exporter", "blackhole"]
        args += ["--debug-log", "traces", "--debug-log-verbosity", "detailed"]
        args += ["--otlp-http-endpoint", f"127.0.0.1:{self.port}"]
        args += ["--otlp-grpc-endpoint", f"127.0.0.1:{free_port()}"]
        args += ["--pid-file", str(self.dir / "rotel.pid"), "--log-file", str(self.dir / "r.log")]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"rotel did not start:\n{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def received(self) -> Counter[str]:
        return Counter(_EVENT_LINE.findall(self.log.read_text()))

    async def until_received(self, ids: set[str], times: int = 1) -> Counter[str]:
        # rotel batches before it prints: the export was acknowledged a moment earlier.
        for _ in range(200):
            got = self.received()
            if all(got[i] >= times for i in ids):
                return got
            await asyncio.sleep(0.05)
        return self.received()


class CrashAfterExport(SpanExporter):
    """Delivers, then dies before the forwarder can mark anything sent."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Any) -> SpanExportResult:
        assert self.inner.export(spans) is SpanExportResult.SUCCESS
        raise SystemError("forwarder killed between export and mark")

    def shutdown(self) -> None:
        self.inner.shutdown()


async def audited_run(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
) -> tuple[str, set[str]]:
    """One task (read a file, answer) in audit mode; its outbox event ids."""
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text(f"alpha {MARK}\n")
    provider = ScriptedProvider([ScriptedTurn("", [("read_file", {"path": "a.txt"})])])
    recorder = TrajectoryRecorder(
        tracer=TracerProvider().get_tracer("test"),
        store=resources.store,
        sessions=resources.sessions,
        audit=True,
    )
    async with traced_worker(client, resources, migrated, workspace, provider, recorder) as queue:
        session_id, handle = await start(
            client, resources, queue, f"Read a.txt {MARK}", tenant=tenant, session_id=sid
        )
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    rows = await outbox(resources, session_id)
    # Exactly the committed items, under ids derived from their idempotency keys.
    items = await items_of(resources, tenant, session_id)
    expected = {
        str(event_id("chat", tenant, i.idempotency_key))
        for i in items
        if i.kind == "assistant_message"
    } | {
        str(event_id("execute_tool", tenant, i.idempotency_key))
        for i in items
        if i.kind == "tool_result"
    }
    assert {str(r.event_id) for r in rows} == expected and len(expected) == 3
    assert sorted(r.kind for r in rows) == ["chat", "chat", "execute_tool"]
    for row in rows:
        assert MARK not in str(row.attributes)
        assert row.attributes["agent.session.id"] == session_id
        assert any(
            str(v).startswith(f"s3://{resources.store.bucket}/") for v in row.attributes.values()
        )
    return session_id, expected


async def outbox(resources: Resources, session_id: str) -> list[TrajectoryOutboxRow]:
    async with resources.sessions() as db:
        rows = await db.scalars(
            select(TrajectoryOutboxRow).where(
                TrajectoryOutboxRow.session_id == uuid.UUID(session_id)
            )
        )
        return list(rows)


async def test_outbox_reaches_a_real_receiver_at_least_once(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
) -> None:
    receiver = Receiver(tmp_path)
    receiver.start()
    receiver.stop()
    exporter: SpanExporter = OTLPSpanExporter(endpoint=receiver.endpoint, timeout=2)
    forwarder = TrajectoryForwarder(resources.sessions, exporter, batch_size=2)
    try:
        session_id, first = await audited_run(client, resources, migrated, workspace, tenant)

        # Receiver down: the export fails and nothing is marked sent.
        try:
            await forwarder.drain()
            raise AssertionError("export to a stopped receiver succeeded")
        except ForwardingFailed:
            pass
        assert all(r.sent_at is None for r in await outbox(resources, session_id))

        receiver.start()
        await forwarder.drain()
        got = await receiver.until_received(first)
        assert all(got[i] == 1 for i in first)
        assert all(r.sent_at is not None for r in await outbox(resources, session_id))
        text = receiver.log.read_text()
        assert "audit chat" in text and "audit execute_tool" in text and MARK not in text

        # Killed between export and mark: the next run sends again; duplicates, no loss.
        session_2, second = await audited_run(client, resources, migrated, workspace, tenant)
        crashing = TrajectoryForwarder(resources.sessions, CrashAfterExport(exporter))
        try:
            await crashing.drain()
            raise AssertionError("the crashing exporter did not crash")
        except SystemError:
            pass
        assert all(r.sent_at is None for r in await outbox(resources, session_2))
        assert await forwarder.drain() >= len(second)
        got = await receiver.until_received(second, times=2)
        assert all(got[i] == 2 for i in second)  # each delivered twice, same event id
        assert all(got[i] == 1 for i in first)  # sent ones are never sent again
        assert all(r.sent_at is not None for r in await outbox(resources, session_2))
    finally:
        receiver.stop()
        exporter.shutdown()


def test_forwarder_records_are_parented_under_the_live_span() -> None:
    """The record of an event names the live span; its own ids come from the event id."""
    row = AuditEvent(
        event_id=uuid.uuid4(),
        kind="chat",
        attributes={tm.PARENT: f"{7:032x}-{9:016x}", "gen_ai.request.model": "m", "x": None},
        created_at=datetime.now(UTC),
    )
    a: ReadableSpan = AuditRecords().record(row)
    b: ReadableSpan = AuditRecords().record(row)
    assert a.parent is not None and (a.parent.trace_id, a.parent.span_id) == (7, 9)
    assert a.context.span_id == b.context.span_id and a.context.trace_id == 7
    assert dict(a.attributes or {})[tm.EVENT_ID] == str(row.event_id)
    assert "x" not in (a.attributes or {}) and tm.PARENT not in (a.attributes or {})


async def test_audit_without_export_names_tool_results_by_uri_and_uploads_no_payloads(
    resources: Resources, tenant: str
) -> None:
    recorder, provider = recorder_for(TelemetrySettings(otlp_endpoint=None, audit=True), resources)
    assert provider is None and recorder.audit and not recorder.keeps_payloads
    ref = await resources.store.put(tenant, b"a tool result", "text/plain")
    named = recorder.payload_ref(ref)
    assert (named.uri, named.sha256, named.size_bytes) == (
        resources.store.uri(ref),
        ref.sha256,
        ref.size_bytes,
    )
    assert await recorder.keep_payload(tenant, b"a model input", "owner") is None
