"""Workflow-side trajectory: temporalio's TracingInterceptor plus one `invoke_agent` span per run.

The SDK's TracingInterceptor creates workflow spans only while the workflow is not replaying
(its replay-safe mechanism), and ends them at once. That leaves two gaps for an agent run:
a span covering the whole run, and a stable parent for spans made in later workflow tasks,
which start from a replay (with max_cached_workflows=0, every task does). Both are closed
here without adding a single command to history:

* the run's `invoke_agent` span gets ids derived from workflow id and run id, so every
  workflow task, replayed or not, computes the same parent for its StartActivity spans;
* the span itself is emitted once, when the run ends outside replay (completed, failed,
  cancelled or continued-as-new), with the run's real start and end time, like the SDK's
  newer OpenTelemetryPlugin does for workflow spans.

Spans need the ids chosen, so the tracer's id generator is wrapped (ForcingIdGenerator);
with a tracer that is not the SDK's, workflow spans keep the SDK's parents and invoke_agent
sits beside them. Workflow types that are not agent runs (the GC) get the SDK's spans only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import temporalio.worker
import temporalio.workflow
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor
from temporalio.exceptions import FailureError

from activities.trajectory import genai as telemetry
from activities.trajectory.ids import can_force_ids, derived_id, forced_ids

_EXTERN = "__durable_agents_invoke_agent_span"
AGENT_WORKFLOW = "AgentWorkflow"
_Carrier = dict[str, Any]


@dataclass(frozen=True)
class _InvokeAgentSpan:
    parent: _Carrier | None
    trace_id: int | None
    span_id: int | None
    name: str
    attributes: telemetry.Attributes
    start_ns: int
    end_ns: int
    error: str | None


class AgentTracingInterceptor(TracingInterceptor):
    """TracingInterceptor (client + worker) whose workflow spans hang under `invoke_agent`."""

    def __init__(
        self,
        tracer: trace.Tracer | None = None,
        *,
        agent_workflows: Collection[str] = (AGENT_WORKFLOW,),
    ) -> None:
        """`agent_workflows`: the workflow types that are agent runs; others (the GC) get
        the SDK's spans only."""
        super().__init__(tracer)
        self._deterministic = can_force_ids(self.tracer)
        self._agents = frozenset(agent_workflows)

    def workflow_interceptor_class(
        self, input: temporalio.worker.WorkflowInterceptorClassInput
    ) -> type[TracingWorkflowInboundInterceptor]:
        super().workflow_interceptor_class(input)  # registers the SDK's own extern function
        input.unsafe_extern_functions[_EXTERN] = self._invoke_agent_span
        state = {"_deterministic": self._deterministic, "_agents": self._agents}
        return type("AgentWorkflowInbound", (_AgentWorkflowInbound,), state)

    def _invoke_agent_span(self, p: _InvokeAgentSpan) -> None:
        # Runs outside the sandbox, called synchronously from workflow code (not on replay).
        context = self.text_map_propagator.extract(p.parent) if p.parent else Context()
        with forced_ids(p.trace_id, p.span_id):
            span = self.tracer.start_span(
                p.name,
                context,
                kind=SpanKind.INTERNAL,
                attributes=p.attributes,
                start_time=p.start_ns,
            )
        if p.error:
            span.set_status(Status(StatusCode.ERROR, p.error))
        span.end(end_time=p.end_ns)


class _AgentWorkflowInbound(TracingWorkflowInboundInterceptor):
    _deterministic = True
    _agents: frozenset[str] = frozenset()

    def __init__(self, next: temporalio.worker.WorkflowInboundInterceptor) -> None:
        super().__init__(next)
        self._loaded = False
        self._caller: _Carrier | None = None
        self._ids: tuple[int | None, int | None] = (None, None)

    def _load_workflow_context_carrier(self) -> _Carrier | None:
        """The context every workflow span starts from: the run's invoke_agent span."""
        if self._loaded:
            return self._workflow_context_carrier
        self._loaded = True
        self._caller = super()._load_workflow_context_carrier()
        info = temporalio.workflow.info()
        if not self._deterministic or info.workflow_type not in self._agents:
            return self._caller
        caller = self.text_map_propagator.extract(self._caller) if self._caller else Context()
        parent = trace.get_current_span(caller).get_span_context()
        span_id = derived_id(64, "invoke_agent", info.workflow_id, info.run_id)
        trace_id = derived_id(128, "trace", info.workflow_id)
        if parent.is_valid:
            trace_id = parent.trace_id
            ctx = SpanContext(trace_id, span_id, True, parent.trace_flags, parent.trace_state)
        else:
            ctx = SpanContext(trace_id, span_id, True, trace.TraceFlags(trace.TraceFlags.SAMPLED))
        # Forced trace id only matters for a root span: one with a parent inherits its trace.
        self._ids = (None if parent.is_valid else trace_id, span_id)
        carrier: _Carrier = {}
        self.text_map_propagator.inject(
            carrier, trace.set_span_in_context(NonRecordingSpan(ctx), caller)
        )
        self._workflow_context_carrier = carrier
        return carrier

    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        self._load_workflow_context_carrier()
        start_ns = temporalio.workflow.time_ns()
        ended, error = False, None
        try:
            result = await super().execute_workflow(input)
            ended = True
            return result
        except temporalio.workflow.ContinueAsNewError:
            ended = True
            raise
        except (FailureError, asyncio.CancelledError) as err:
            ended, error = True, f"{type(err).__name__}: {err}"
            raise
        finally:
            # Not on replay (eviction counts as replay too), and not for a workflow task
            # failure (any other exception): that task is retried and will end the run later.
            agent = temporalio.workflow.info().workflow_type in self._agents
            if ended and agent and not temporalio.workflow.unsafe.is_replaying():
                self._emit_invoke_agent(input, start_ns, error)

    def _emit_invoke_agent(
        self, input: temporalio.worker.ExecuteWorkflowInput, start_ns: int, error: str | None
    ) -> None:
        info = temporalio.workflow.info()
        arg = input.args[0] if input.args else None
        agent = temporalio.workflow.memo_value("agent_name", info.workflow_type, type_hint=str)
        event = telemetry.AgentRunEvent(
            tenant_id=str(getattr(arg, "tenant_id", "")),
            session_id=str(getattr(arg, "session_id", "")),
            agent=agent,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
        )
        self._extern_functions[_EXTERN](  # type: ignore[literal-required]
            _InvokeAgentSpan(
                parent=self._caller,
                trace_id=self._ids[0],
                span_id=self._ids[1],
                name=telemetry.span_name(telemetry.INVOKE_AGENT, agent),
                attributes=telemetry.agent_attributes(event),
                start_ns=start_ns,
                end_ns=temporalio.workflow.time_ns(),
                error=error,
            )
        )
