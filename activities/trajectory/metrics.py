"""The trajectory's metric instruments: model and tool latency, tokens, tool errors and the
approvals-waiting gauge. Names and dimensions come from `genai`."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from durable_agents.activities.providers.base import ModelReply
from durable_agents.activities.trajectory import genai


class TrajectoryMetrics:
    """The instruments, named after the GenAI metric conventions where there is one."""

    def __init__(self, meter: Meter) -> None:
        self._model_duration = meter.create_histogram(
            genai.MODEL_DURATION, unit="s", description="Model call latency."
        )
        self._tokens = meter.create_counter(
            genai.TOKENS, unit="{token}", description="Tokens in and out, by model."
        )
        # The GenAI convention's histogram: one point per reply and token type, as the
        # provider reported them (the counter above stays for dashboards built on it).
        self._token_usage = meter.create_histogram(
            genai.TOKEN_USAGE, unit="{token}", description="Tokens used per model reply."
        )
        self._tool_duration = meter.create_histogram(
            genai.TOOL_DURATION, unit="s", description="Tool execution latency."
        )
        self._tool_errors = meter.create_counter(
            genai.TOOL_ERRORS, unit="{error}", description="Tool calls that failed, by tool."
        )
        self._waiting = meter.create_up_down_counter(
            genai.APPROVALS_WAITING,
            unit="{session}",
            description="Sessions waiting for an approval decision.",
        )

    def model_call(
        self,
        ev: genai.ModelCallEvent,
        seconds: float,
        reply: ModelReply | None,
        error_type: str | None = None,
    ) -> None:
        """One model call: its latency, and its tokens when the provider answered."""
        self._model_duration.record(seconds, genai.model_metric_attributes(ev, error_type))
        if reply is not None:
            self._tokens.add(reply.usage.input_tokens, genai.token_attributes(ev, "input"))
            self._tokens.add(reply.usage.output_tokens, genai.token_attributes(ev, "output"))
            usage = reply.usage
            input_attrs = genai.token_usage_attributes(ev, "input")
            self._token_usage.record(usage.input_tokens, input_attrs)
            self._token_usage.record(
                usage.output_tokens, genai.token_usage_attributes(ev, "output")
            )

    def tool_call(self, ev: genai.ToolCallEvent, seconds: float, error_type: str | None) -> None:
        """One tool call: its latency, and an error count when it failed."""
        attrs = genai.tool_metric_attributes(ev, error_type)
        if error_type:
            self._tool_errors.add(1, attrs)
        self._tool_duration.record(seconds, attrs)

    def approvals_waiting(self, delta: int, tenant_id: str) -> None:
        self._waiting.add(delta, genai.tenant_attributes(tenant_id))
