"""Workflow-side trajectory: the SDK's OpenTelemetry interceptor, plus one `invoke_agent` span
per agent run that the run's workflow and activity spans hang under.

The SDK (`temporalio.contrib.opentelemetry`) does the replay-safe work: with its tracer
provider (`create_tracer_provider`: `TemporalIdGenerator` ids drawn from the workflow's seeded
random, spans ended only outside replay, started at workflow time on replay), a span begun
in workflow code has the same id in every workflow task and is exported once. Its interceptor
makes `StartWorkflow`, `RunWorkflow`, `StartActivity` and `RunActivity` spans.

Ours differs in one place, for a reason: the run's `invoke_agent` span must be the parent of
the run's `RunWorkflow` and `StartActivity` spans (one tree: caller -> invoke_agent ->
StartActivity -> RunActivity -> chat), and the root of the trace when nobody traced the
start. The SDK makes `RunWorkflow` the current span for the whole run, so StartActivity
would hang under it. So `AgentTracingPlugin` puts our interceptor on both sides of the SDK's
(the SDK's own `OpenTelemetryPlugin` can only append its interceptor last):

* outside it, `invoke_agent` is started under the caller's context and handed to the SDK as
  the context of the workflow's headers (the public header the SDK reads);
* inside it, `invoke_agent` is made current again for the workflow's own code, so the
  activities it starts are its children rather than RunWorkflow's.

Signals, queries and updates sent without a trace context are traced under the run's
`invoke_agent` too, so an untraced `approve` stays in the run's trace. Workflow types that
are not agent runs (the GC) get the SDK's spans only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

import opentelemetry.context
import temporalio.api.common.v1
import temporalio.converter
import temporalio.worker
import temporalio.workflow
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
from temporalio.exceptions import FailureError
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agents.activities.trajectory import genai

AGENT_WORKFLOW = "AgentWorkflow"
# The header the SDK's interceptors carry the W3C trace context in (their wire format), and
# the same propagators and converter they use for it.
TRACE_HEADER = "_tracer-data"
_PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
_CONVERTER = temporalio.converter.PayloadConverter.default
_Headers = Mapping[str, temporalio.api.common.v1.Payload]


def context_of(headers: _Headers) -> Context:
    """The trace context a Temporal call's headers carry (empty if none)."""
    payload = headers.get(TRACE_HEADER)
    if payload is None:
        return Context()
    carrier = _CONVERTER.from_payloads([payload])[0]
    return _PROPAGATOR.extract(carrier) if isinstance(carrier, dict) else Context()


def with_context(headers: _Headers, context: Context) -> dict[str, Any]:
    """`headers` carrying `context` instead of whatever trace context they had."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context)
    return {**headers, TRACE_HEADER: _CONVERTER.to_payloads([carrier])[0]}


class _AgentInbound(temporalio.worker.WorkflowInboundInterceptor):
    _agents: frozenset[str] = frozenset()

    def _is_agent(self) -> bool:
        return temporalio.workflow.info().workflow_type in self._agents


class _InvokeAgentInbound(_AgentInbound):
    """Outside the SDK's interceptor: the run's `invoke_agent` span."""

    def __init__(self, next: temporalio.worker.WorkflowInboundInterceptor) -> None:
        super().__init__(next)
        self._run: Context | None = None

    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        if not self._is_agent():
            return await super().execute_workflow(input)
        caller = context_of(input.headers)
        span = trace.get_tracer(__name__).start_span(
            genai.span_name(genai.INVOKE_AGENT, _agent_name()),
            caller,
            kind=SpanKind.INTERNAL,
            attributes=genai.agent_attributes(_run_event(input)),
        )
        self._run = trace.set_span_in_context(span, caller)
        input.headers = with_context(input.headers, self._run)
        try:
            result = await super().execute_workflow(input)
        except temporalio.workflow.ContinueAsNewError:
            span.end()
            raise
        except (FailureError, asyncio.CancelledError) as err:
            span.set_status(Status(StatusCode.ERROR, type(err).__name__))
            span.end()
            raise
        # Any other exception fails the workflow task, which is retried and ends the run
        # later: the span is left open (the SDK's spans end only outside replay anyway).
        span.end()
        return result

    def _adopt(self, headers: _Headers) -> _Headers:
        if self._run is None or TRACE_HEADER in headers or not self._is_agent():
            return headers
        return with_context(headers, self._run)

    async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
        await super().handle_signal(dataclasses.replace(input, headers=self._adopt(input.headers)))

    async def handle_query(self, input: temporalio.worker.HandleQueryInput) -> Any:
        return await super().handle_query(
            dataclasses.replace(input, headers=self._adopt(input.headers))
        )

    def handle_update_validator(self, input: temporalio.worker.HandleUpdateInput) -> None:
        super().handle_update_validator(
            dataclasses.replace(input, headers=self._adopt(input.headers))
        )

    async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
        return await super().handle_update_handler(
            dataclasses.replace(input, headers=self._adopt(input.headers))
        )


class _RunContextInbound(_AgentInbound):
    """Inside the SDK's interceptor: the workflow's own code runs with `invoke_agent` (from
    the headers the outer interceptor set) current, not the SDK's RunWorkflow span."""

    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        if not self._is_agent() or TRACE_HEADER not in input.headers:
            return await super().execute_workflow(input)
        token = opentelemetry.context.attach(context_of(input.headers))
        try:
            return await super().execute_workflow(input)
        finally:
            # An evicted run is finalized in another context: there is nothing to detach.
            with contextlib.suppress(ValueError):
                token.var.reset(token)


def _agent_name() -> str:
    info = temporalio.workflow.info()
    return temporalio.workflow.memo_value("agent_name", info.workflow_type, type_hint=str)


def _run_event(input: temporalio.worker.ExecuteWorkflowInput) -> genai.AgentRunEvent:
    info = temporalio.workflow.info()
    arg = input.args[0] if input.args else None
    return genai.AgentRunEvent(
        tenant_id=str(getattr(arg, "tenant_id", "")),
        session_id=str(getattr(arg, "session_id", "")),
        agent=_agent_name(),
        workflow_id=info.workflow_id,
        run_id=info.run_id,
    )


class _WorkflowSide(temporalio.worker.Interceptor):
    def __init__(self, inbound: type[_AgentInbound], agents: frozenset[str]) -> None:
        self._inbound = inbound
        self._agents = agents

    def workflow_interceptor_class(
        self, input: temporalio.worker.WorkflowInterceptorClassInput
    ) -> type[temporalio.worker.WorkflowInboundInterceptor]:
        return type(self._inbound.__name__, (self._inbound,), {"_agents": self._agents})


def _otel_passes_through(runner: WorkflowRunner | None) -> WorkflowRunner:
    # As the SDK's OpenTelemetryPlugin does: workflow code must use the process's one
    # tracer provider, not a copy imported inside the sandbox.
    if runner is None:
        raise ValueError("AgentTracingPlugin needs a workflow runner")
    if isinstance(runner, SandboxedWorkflowRunner):
        return dataclasses.replace(
            runner, restrictions=runner.restrictions.with_passthrough_modules("opentelemetry")
        )
    return runner


class AgentTracingPlugin(SimplePlugin):
    """Workflow and activity spans (the SDK's) under one `invoke_agent` span per agent run.

    Needs the global tracer provider to be the SDK's replay-safe one
    (`temporalio.contrib.opentelemetry.create_tracer_provider()`); the SDK refuses to start
    a worker otherwise.
    """

    def __init__(self, *, agent_workflows: Collection[str] = (AGENT_WORKFLOW,)) -> None:
        agents = frozenset(agent_workflows)
        super().__init__(
            "durable_agents.AgentTracingPlugin",
            interceptors=[
                _WorkflowSide(_InvokeAgentInbound, agents),
                OpenTelemetryInterceptor(add_temporal_spans=True),
                _WorkflowSide(_RunContextInbound, agents),
            ],
            workflow_runner=_otel_passes_through,
        )
