"""TrajectoryRecorder: what call_model and run_tool use to leave a trajectory.

Per model call a `chat {model}` span and per tool call an `execute_tool {tool}` span, with
metrics. Payloads go by reference: the assembled input messages and the reply are uploaded
to the artifact store as JSON and held by a `trajectory` ref that expires (DESIGN.md: never
required for resume); tool results already are artifacts, so their span names that object.

Telemetry is best-effort: a failed upload, ref or export is logged and the activity goes
on. The one exception is audit mode, where the outbox row is written in the transaction
that commits the item it describes: then the audit trail cannot miss a committed item, and
the row fails only when that transaction fails anyway.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import temporalio.worker
from opentelemetry import metrics, trace
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.trajectory import genai as tm
from durable_agents.activities.trajectory.approvals import ApprovalsWaitingInterceptor
from durable_agents.activities.trajectory.metrics import TrajectoryMetrics
from durable_agents.activities.trajectory.recordings import (
    ModelCallRecording,
    ToolCallRecording,
    safely,
)
from durable_agents.activities.trajectory.workflow_tracing import AgentTracingPlugin
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.outbox import OutboxRepository
from durable_agents.workflows.contracts import ArtifactRef

DEFAULT_RETENTION = timedelta(days=30)


class TrajectoryRecorder:
    """Tracer + metrics + artifact store + AgentState sessions. The default does nothing."""

    def __init__(
        self,
        *,
        tracer: trace.Tracer | None = None,
        meter: metrics.Meter | None = None,
        store: ArtifactStore | None = None,
        sessions: async_sessionmaker[AsyncSession] | None = None,
        audit: bool = False,
        retention: timedelta = DEFAULT_RETENTION,
        keep_payloads: bool = True,
    ) -> None:
        """`store` names artifacts by URI in spans; with `sessions` and `keep_payloads`, model
        inputs and replies are uploaded too, held by expiring trajectory refs."""
        if audit and sessions is None:
            raise ValueError("audit mode writes the outbox: it needs the AgentState sessions")
        self.tracer = tracer or trace.NoOpTracer()
        self.metrics = TrajectoryMetrics(meter or metrics.NoOpMeter("durable-agents"))
        self.audit = audit
        self.retention = retention
        self._store = store
        self._sessions = sessions
        self._keep_payloads = keep_payloads

    @classmethod
    def noop(cls) -> TrajectoryRecorder:
        return cls()

    def model_call(self, ev: tm.ModelCallEvent) -> ModelCallRecording:
        return ModelCallRecording(self, ev)

    def tool_call(self, ev: tm.ToolCallEvent) -> ToolCallRecording:
        return ToolCallRecording(self, ev)

    def interceptors(self) -> list[temporalio.worker.Interceptor]:
        """For build_cloud_worker: the approvals-waiting gauge."""
        if self._sessions is None:
            return []
        return [ApprovalsWaitingInterceptor(self._sessions, self.metrics)]

    def plugins(self) -> list[temporalio.worker.Plugin]:
        """For build_cloud_worker: workflow and activity spans, when this recorder traces.

        They go to the global tracer provider, which must then be the SDK's replay-safe one
        (`create_tracer_provider()`); do not also put the plugin on the worker's client.
        """
        if isinstance(self.tracer, trace.NoOpTracer):
            return []
        return [AgentTracingPlugin()]

    @property
    def keeps_payloads(self) -> bool:
        return self._keep_payloads and self._store is not None and self._sessions is not None

    async def keep_payload(
        self, tenant_id: str, data: bytes, owner_id: str
    ) -> tm.PayloadRef | None:
        """Upload (verified), register and hold with an expiring trajectory ref; None on failure."""
        if not self.keeps_payloads or self._store is None or self._sessions is None:
            return None
        with safely("payload upload"):
            ref = await self._store.put(tenant_id, data, "application/json")
            async with agent_state(self._sessions, tenant_id, write=True) as st:
                artifact_id = await register_uploaded(st.db, self._store, ref, data)
                await self._hold(st, artifact_id, owner_id)
            return self.payload_ref(ref)
        return None

    def payload_ref(self, ref: ArtifactRef) -> tm.PayloadRef:
        """How spans name an artifact: its URI when the store is known, digest and size."""
        uri = self._store.uri(ref) if self._store is not None else None
        return tm.PayloadRef(uri, ref.sha256, ref.size_bytes)

    async def keep_artifact(self, tenant_id: str, artifact_id: uuid.UUID, owner_id: str) -> None:
        """Hold an artifact some committed item already references, for the trajectory too."""
        if self._sessions is None:
            return
        with safely("trajectory ref"):
            async with agent_state(self._sessions, tenant_id, write=True) as st:
                await self._hold(st, artifact_id, owner_id)

    async def _hold(self, st: AgentState, artifact_id: uuid.UUID, owner_id: str) -> None:
        await st.artifacts.add_ref(
            artifact_id,
            owner_type="trajectory",
            owner_id=owner_id,
            required_for_resume=False,
            expires_at=datetime.now(UTC) + self.retention,
        )

    async def write_event(
        self,
        db: AsyncSession,
        kind: str,
        event_id: uuid.UUID,
        ev: tm.ModelCallEvent | tm.ToolCallEvent,
        attributes: dict[str, Any],
    ) -> None:
        """Audit mode: the event joins the caller's unit of work; a retry writes it once."""
        if not self.audit:
            return
        await OutboxRepository(db).add(
            event_id,
            tenant_id=ev.tenant_id,
            session_id=uuid.UUID(ev.session_id),
            kind=kind,
            attributes=attributes,
        )
