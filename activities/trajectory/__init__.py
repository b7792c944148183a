"""The trajectory: OpenTelemetry spans (payloads by reference), metrics and the audit outbox.

Modules, each one concept, imported only downward:
  genai             the GenAI naming conventions (the one module that knows their names)
  ids               span ids derived from stable names (replay and re-send compute the same)
  metrics           the metric instruments
  recordings        the span of one model call / one tool call
  recorder          TrajectoryRecorder: what activities and workers use
  workflow_tracing  the SDK's workflow/activity spans under one `invoke_agent` per run
  approvals         the activity interceptor keeping the approvals-waiting gauge
  audit             an outbox event as the span the forwarder exports
"""

from durable_agents.activities.trajectory.audit import AuditEvent, AuditRecords
from durable_agents.activities.trajectory.genai import (
    EVENT_ID,
    PARENT,
    ModelCallEvent,
    PayloadRef,
    ToolCallEvent,
    event_id,
    payload_refs,
)
from durable_agents.activities.trajectory.recorder import TrajectoryRecorder
from durable_agents.activities.trajectory.workflow_tracing import AgentTracingPlugin

__all__ = [
    "EVENT_ID",
    "PARENT",
    "AgentTracingPlugin",
    "AuditEvent",
    "AuditRecords",
    "ModelCallEvent",
    "PayloadRef",
    "ToolCallEvent",
    "TrajectoryRecorder",
    "event_id",
    "payload_refs",
]
