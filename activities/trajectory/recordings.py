"""The spans of one model call and one tool call.

A recording reaches its recorder only through the `Sink` protocol below (tracer, metrics,
payload keeping, the audit event), so this module does not import the recorder and the
recorder may import it.

Each span ends at an explicit time: the operation's clock stops when the provider or the
tool returns, before payload uploads and the AgentState commit, so span durations and the
latency metrics measure the call itself.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import Token
from types import TracebackType
from typing import Any, Protocol, Self

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.activities.providers.base import ChatMessage, ModelReply
from durable_agents.activities.trajectory import genai as tm
from durable_agents.activities.trajectory.metrics import TrajectoryMetrics
from durable_agents.workflows.contracts import ArtifactRef

logger = logging.getLogger(__name__)


class Sink(Protocol):
    """What a recording needs of its recorder."""

    @property
    def tracer(self) -> trace.Tracer: ...

    @property
    def metrics(self) -> TrajectoryMetrics: ...

    @property
    def keeps_payloads(self) -> bool: ...

    def payload_ref(self, ref: ArtifactRef) -> tm.PayloadRef: ...

    async def keep_payload(
        self, tenant_id: str, data: bytes, owner_id: str
    ) -> tm.PayloadRef | None: ...

    async def keep_artifact(
        self, tenant_id: str, artifact_id: uuid.UUID, owner_id: str
    ) -> None: ...

    async def write_event(
        self,
        db: AsyncSession,
        kind: str,
        event_id: uuid.UUID,
        ev: tm.ModelCallEvent | tm.ToolCallEvent,
        attributes: dict[str, Any],
    ) -> None: ...


@contextmanager
def safely(what: str) -> Iterator[None]:
    """Log and swallow: telemetry never fails the activity it describes."""
    try:
        yield
    except Exception:
        logger.warning("trajectory: %s failed; the activity goes on", what, exc_info=True)


class _Recording:
    """One span with an explicit end: the operation's clock stops before payload uploads."""

    kind = ""

    def __init__(
        self,
        rec: Sink,
        ev: tm.ModelCallEvent | tm.ToolCallEvent,
        name: str,
        span_kind: SpanKind,
        attrs: tm.Attributes,
    ) -> None:
        self._rec = rec
        self._ev = ev
        self.event_id = tm.event_id(self.kind, ev.tenant_id, ev.idempotency_key)
        self._attrs: dict[str, Any] = {**attrs, tm.EVENT_ID: str(self.event_id)}
        self._name, self._span_kind = name, span_kind
        self._span: trace.Span = trace.INVALID_SPAN
        self._token: Token[Context] | None = None
        self._start_ns = self._end_ns = 0
        self._ended = False

    async def __aenter__(self) -> Self:
        with safely("span start"):
            self._span = self._rec.tracer.start_span(
                self._name, kind=self._span_kind, attributes=self._attrs
            )
            self._token = otel_context.attach(trace.set_span_in_context(self._span))
        self._start_ns = time.time_ns()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        _: TracebackType | None,
    ) -> None:
        if self._token is not None:
            otel_context.detach(self._token)
        if exc is not None:
            with safely("error record"):
                self._failed(type(exc).__name__, not self._end_ns, exc)
        self._end()

    def _stop(self) -> float:
        self._end_ns = time.time_ns()
        return (self._end_ns - self._start_ns) / 1e9

    def _set(self, attrs: tm.Attributes) -> None:
        self._attrs.update(attrs)
        with safely("span attributes"):
            self._span.set_attributes(attrs)

    def _error(self, error_type: str, exc: BaseException | None = None) -> None:
        self._set(tm.error_attributes(error_type))
        with safely("span status"):
            if exc is not None:
                self._span.record_exception(exc)
            self._span.set_status(Status(StatusCode.ERROR, error_type))

    def _failed(self, error_type: str, before_stop: bool, exc: BaseException) -> None:
        if not self._ended:
            self._error(error_type, exc)

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        with safely("span end"):
            self._span.end(end_time=self._end_ns or None)

    async def _write_event(self, db: AsyncSession) -> None:
        attrs = dict(self._attrs)
        ctx = self._span.get_span_context()
        if ctx.is_valid:
            attrs[tm.PARENT] = f"{ctx.trace_id:032x}-{ctx.span_id:016x}"
        await self._rec.write_event(db, self.kind, self.event_id, self._ev, attrs)


class ModelCallRecording(_Recording):
    kind = tm.CHAT

    def __init__(self, rec: Sink, ev: tm.ModelCallEvent) -> None:
        super().__init__(
            rec, ev, tm.span_name(tm.CHAT, ev.model), SpanKind.CLIENT, tm.chat_attributes(ev)
        )
        self._model_ev = ev

    async def replied(self, messages: Sequence[ChatMessage], reply: ModelReply) -> None:
        """The provider answered: stop the clock, then upload what went in and what came out."""
        seconds = self._stop()
        with safely("model metrics"):
            self._rec.metrics.model_call(self._model_ev, seconds, reply)
        self._set(tm.reply_attributes(reply))
        if self._rec.keeps_payloads:
            owner = str(self.event_id)
            payloads: list[tuple[tm.PayloadRole, bytes]] = []
            with safely("payload serialization"):
                payloads.append(("input", tm.input_messages_json(messages)))
                payloads.append(("output", tm.output_messages_json(reply)))
            for role, data in payloads:
                ref = await self._rec.keep_payload(self._ev.tenant_id, data, owner)
                if ref is not None:
                    self._set(tm.payload_attributes(role, ref))
        self._end()

    async def committed(self, db: AsyncSession) -> None:
        """Inside the transaction that persists the reply (audit mode writes its event there)."""
        await self._write_event(db)

    def _failed(self, error_type: str, before_stop: bool, exc: BaseException) -> None:
        if before_stop:  # the provider call itself failed
            self._rec.metrics.model_call(self._model_ev, self._stop(), None, error_type)
        super()._failed(error_type, before_stop, exc)


class ToolCallRecording(_Recording):
    kind = tm.EXECUTE_TOOL

    def __init__(self, rec: Sink, ev: tm.ToolCallEvent) -> None:
        super().__init__(
            rec,
            ev,
            tm.span_name(tm.EXECUTE_TOOL, ev.tool),
            SpanKind.INTERNAL,
            tm.tool_attributes(ev),
        )
        self._tool_ev = ev
        self._held: uuid.UUID | None = None

    def executed(self, error_type: str | None) -> None:
        """The tool returned (a ToolError counts as returning, with its error type)."""
        seconds = self._stop()
        with safely("tool metrics"):
            self._rec.metrics.tool_call(self._tool_ev, seconds, error_type)
        if error_type:
            self._error(error_type)

    async def committed(
        self, db: AsyncSession, ref: ArtifactRef | None, artifact_id: uuid.UUID | None
    ) -> None:
        """Inside the transaction that commits the tool_result item."""
        if ref is not None:
            self._set(tm.payload_attributes("tool_result", self._rec.payload_ref(ref)))
        self._held = artifact_id
        await self._write_event(db)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await super().__aexit__(exc_type, exc, tb)
        if exc is None and self._held is not None:
            await self._rec.keep_artifact(self._ev.tenant_id, self._held, str(self.event_id))

    def _failed(self, error_type: str, before_stop: bool, exc: BaseException) -> None:
        if before_stop:  # the tool raised (not a ToolError): Temporal retries the activity
            self._rec.metrics.tool_call(self._tool_ev, self._stop(), error_type)
        super()._failed(error_type, before_stop, exc)
