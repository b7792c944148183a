"""Trajectory adapter: our own event and field names, mapped onto OpenTelemetry's GenAI
semantic conventions.

This is the one module that knows `gen_ai.*` names. The conventions are still in
development and rename things between releases, so following them is a change here only;
the activities, the recorder and the outbox speak in the dataclasses below.

Content never goes into an attribute: prompts, completions and tool outputs are uploaded to
the artifact store, and spans carry `sha256:<hex>` references and sizes instead (DESIGN.md:
"full payloads only by reference").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry.metrics import Meter
from opentelemetry.util.types import AttributeValue

from activities.providers.base import ChatMessage, ModelReply

Attributes = dict[str, AttributeValue]

# Our event kinds; also the `kind` column of trajectory_outbox.
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"
INVOKE_AGENT = "invoke_agent"

# Our own attributes (not GenAI conventions): where a span sits in AgentState.
SESSION_ID = "agent.session.id"
STEP = "agent.step"
TENANT_ID = "agent.tenant.id"
EVENT_ID = "agent.event.id"
EVENT_KIND = "agent.event.kind"
# The live span an outbox event describes ("<trace hex>-<span hex>"); the forwarder parents
# the exported audit record under it.
PARENT = "agent.trace.parent"

_ERROR_TYPE = "error.type"
# Fixed namespace: event ids are uuid5 of (tenant, idempotency key, kind), so a retried
# activity that commits the same item also commits the same event id.
_EVENT_NAMESPACE = uuid.UUID("6f0d3c52-2a5e-4b8e-9a51-2f1e4f6b7c01")

PayloadRole = Literal["input", "output", "tool_result"]
_PAYLOAD_KEYS: dict[str, tuple[str, str]] = {
    "input": ("gen_ai.input.messages_ref", "gen_ai.input.messages_size_bytes"),
    "output": ("gen_ai.output.messages_ref", "gen_ai.output.messages_size_bytes"),
    "tool_result": ("gen_ai.tool.call.result_ref", "gen_ai.tool.call.result_size_bytes"),
}


@dataclass(frozen=True)
class ModelCallEvent:
    tenant_id: str
    session_id: str
    step: int
    provider: str
    model: str
    idempotency_key: str


@dataclass(frozen=True)
class ToolCallEvent:
    tenant_id: str
    session_id: str
    step: int
    tool: str
    tool_call_id: str
    idempotency_key: str


@dataclass(frozen=True)
class AgentRunEvent:
    tenant_id: str
    session_id: str
    agent: str
    workflow_id: str
    run_id: str


@dataclass(frozen=True)
class PayloadRef:
    """Where a payload went: content-addressed, so the digest names the object."""

    sha256: str
    size_bytes: int


def event_id(kind: str, tenant_id: str, idempotency_key: str) -> uuid.UUID:
    return uuid.uuid5(_EVENT_NAMESPACE, f"{tenant_id}\n{idempotency_key}\n{kind}")


def span_name(kind: str, subject: str) -> str:
    """`chat {model}`, `execute_tool {tool}`, `invoke_agent {agent}`."""
    return f"{kind} {subject}"


def _where(tenant_id: str, session_id: str, step: int | None = None) -> Attributes:
    attrs: Attributes = {
        "gen_ai.conversation.id": session_id,
        SESSION_ID: session_id,
        TENANT_ID: tenant_id,
    }
    if step is not None:
        attrs[STEP] = step
    return attrs


def chat_attributes(ev: ModelCallEvent) -> Attributes:
    return {
        "gen_ai.operation.name": CHAT,
        "gen_ai.provider.name": ev.provider,
        "gen_ai.request.model": ev.model,
        **_where(ev.tenant_id, ev.session_id, ev.step),
    }


def reply_attributes(reply: ModelReply) -> Attributes:
    attrs: Attributes = {
        "gen_ai.response.finish_reasons": [reply.finish_reason],
        "gen_ai.usage.input_tokens": reply.usage.input_tokens,
        "gen_ai.usage.output_tokens": reply.usage.output_tokens,
    }
    if reply.model:
        attrs["gen_ai.response.model"] = reply.model
    return attrs


def tool_attributes(ev: ToolCallEvent) -> Attributes:
    return {
        "gen_ai.operation.name": EXECUTE_TOOL,
        "gen_ai.tool.name": ev.tool,
        "gen_ai.tool.call.id": ev.tool_call_id,
        "gen_ai.tool.type": "function",
        **_where(ev.tenant_id, ev.session_id, ev.step),
    }


def agent_attributes(ev: AgentRunEvent) -> Attributes:
    return {
        "gen_ai.operation.name": INVOKE_AGENT,
        "gen_ai.agent.name": ev.agent,
        "gen_ai.agent.id": ev.workflow_id,
        "agent.run.id": ev.run_id,
        **_where(ev.tenant_id, ev.session_id),
    }


def error_attributes(error_type: str) -> Attributes:
    return {_ERROR_TYPE: error_type}


def payload_attributes(role: PayloadRole, ref: PayloadRef) -> Attributes:
    ref_key, size_key = _PAYLOAD_KEYS[role]
    return {ref_key: f"sha256:{ref.sha256}", size_key: ref.size_bytes}


def payload_refs(attrs: Mapping[str, Any]) -> dict[str, str]:
    """The `sha256:<hex>` refs among span attributes, by role (for readers and tests)."""
    return {
        role: str(attrs[ref_key])
        for role, (ref_key, _) in _PAYLOAD_KEYS.items()
        if isinstance(attrs.get(ref_key), str)
    }


# -- payloads: the GenAI message schema, serialized for the object store -------------------------


def _call_part(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def _message(m: ChatMessage) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if m.role == "tool":
        parts.append({"type": "tool_call_response", "id": m.tool_call_id, "response": m.content})
    elif m.content:
        parts.append({"type": "text", "content": m.content})
    parts += [_call_part(c.id, c.name, c.arguments) for c in m.tool_calls]
    return {"role": m.role, "parts": parts, **({"name": m.name} if m.name else {})}


def _dump(value: Any) -> bytes:
    # Sorted and compact: the same conversation serializes to the same bytes, hence one object.
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def input_messages_json(messages: Sequence[ChatMessage]) -> bytes:
    """What `gen_ai.input.messages` would hold, as the bytes its ref points at."""
    return _dump([_message(m) for m in messages])


def output_messages_json(reply: ModelReply) -> bytes:
    parts: list[dict[str, Any]] = [{"type": "text", "content": reply.text}] if reply.text else []
    parts += [_call_part(c.id, c.name, c.arguments) for c in reply.tool_calls]
    return _dump([{"role": "assistant", "parts": parts, "finish_reason": reply.finish_reason}])


# -- metrics ------------------------------------------------------------------------------------


class TrajectoryMetrics:
    """The instruments, named after the GenAI metric conventions where there is one."""

    def __init__(self, meter: Meter) -> None:
        self._model_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call latency."
        )
        self._tokens = meter.create_counter(
            "agent.model.tokens", unit="{token}", description="Tokens in and out, by model."
        )
        self._tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration", unit="s", description="Tool execution latency."
        )
        self._tool_errors = meter.create_counter(
            "agent.tool.errors", unit="{error}", description="Tool calls that failed, by tool."
        )
        self._waiting = meter.create_up_down_counter(
            "agent.approvals.waiting",
            unit="{session}",
            description="Sessions waiting for an approval decision.",
        )

    def model_call(
        self,
        ev: ModelCallEvent,
        seconds: float,
        reply: ModelReply | None,
        error_type: str | None = None,
    ) -> None:
        attrs: Attributes = {
            "gen_ai.operation.name": CHAT,
            "gen_ai.provider.name": ev.provider,
            "gen_ai.request.model": ev.model,
        }
        self._model_duration.record(
            seconds, {**attrs, **(error_attributes(error_type) if error_type else {})}
        )
        if reply is not None:
            self._tokens.add(reply.usage.input_tokens, {**attrs, "gen_ai.token.type": "input"})
            self._tokens.add(reply.usage.output_tokens, {**attrs, "gen_ai.token.type": "output"})

    def tool_call(self, ev: ToolCallEvent, seconds: float, error_type: str | None) -> None:
        attrs: Attributes = {"gen_ai.operation.name": EXECUTE_TOOL, "gen_ai.tool.name": ev.tool}
        if error_type:
            attrs.update(error_attributes(error_type))
            self._tool_errors.add(1, attrs)
        self._tool_duration.record(seconds, attrs)

    def approvals_waiting(self, delta: int, tenant_id: str) -> None:
        self._waiting.add(delta, {TENANT_ID: tenant_id})
