"""The GenAI naming conventions: our event and field names mapped onto OpenTelemetry's GenAI
semantic conventions (spans, metrics and the message schema of payloads).

This is the one module that knows `gen_ai.*` names. The conventions are still in
development and rename things between releases, so following them is a change here only;
the recorder, the metrics and the outbox speak in the dataclasses below.

Content never goes into an attribute: prompts, completions and tool outputs are uploaded to
the artifact store, and spans carry a reference instead (DESIGN.md: "full payloads only by
reference"). As the GenAI proposals for content references expect, the `*_ref` attribute is
the object's URI (`s3://bucket/key`), with its sha256 and size beside it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry.util.types import AttributeValue

from durable_agents.activities.providers.base import ChatMessage, ModelReply

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
# Per role, the attribute stem: `{stem}_ref` (URI), `{stem}_sha256`, `{stem}_size_bytes`.
_PAYLOAD_STEMS: dict[str, str] = {
    "input": "gen_ai.input.messages",
    "output": "gen_ai.output.messages",
    "tool_result": "gen_ai.tool.call.result",
}

# Metric instruments: the GenAI metric conventions where there is one, ours otherwise.
MODEL_DURATION = "gen_ai.client.operation.duration"
TOOL_DURATION = "gen_ai.execute_tool.duration"
TOKENS = "agent.model.tokens"
TOKEN_USAGE = "gen_ai.client.token.usage"
TOOL_ERRORS = "agent.tool.errors"
APPROVALS_WAITING = "agent.approvals.waiting"


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
    """Where a payload went: its object's URI (None when the store is unknown), and the
    digest and size that identify the bytes (content-addressed)."""

    uri: str | None
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
    stem = _PAYLOAD_STEMS[role]
    attrs: Attributes = {f"{stem}_sha256": ref.sha256, f"{stem}_size_bytes": ref.size_bytes}
    if ref.uri is not None:
        attrs[f"{stem}_ref"] = ref.uri
    return attrs


def payload_refs(attrs: Mapping[str, Any]) -> dict[str, PayloadRef]:
    """The payload references among span attributes, by role (for readers and tests)."""
    found: dict[str, PayloadRef] = {}
    for role, stem in _PAYLOAD_STEMS.items():
        sha, size, uri = (attrs.get(f"{stem}_{k}") for k in ("sha256", "size_bytes", "ref"))
        if isinstance(sha, str) and isinstance(size, int):
            found[role] = PayloadRef(uri if isinstance(uri, str) else None, sha, size)
    return found


def model_metric_attributes(ev: ModelCallEvent, error_type: str | None = None) -> Attributes:
    """The dimensions of model-call metrics: operation, provider, model (and error)."""
    attrs: Attributes = {
        "gen_ai.operation.name": CHAT,
        "gen_ai.provider.name": ev.provider,
        "gen_ai.request.model": ev.model,
    }
    return {**attrs, **(error_attributes(error_type) if error_type else {})}


def token_attributes(ev: ModelCallEvent, token_type: Literal["input", "output"]) -> Attributes:
    return {**model_metric_attributes(ev), "gen_ai.token.type": token_type}


def token_usage_attributes(
    ev: ModelCallEvent, token_type: Literal["input", "output"]
) -> Attributes:
    """`gen_ai.client.token.usage`'s dimensions: the convention's, and `gen_ai.system`, the
    older name of the provider attribute that dashboards built on it still group by."""
    return {**token_attributes(ev, token_type), "gen_ai.system": ev.provider}


def tool_metric_attributes(ev: ToolCallEvent, error_type: str | None = None) -> Attributes:
    attrs: Attributes = {"gen_ai.operation.name": EXECUTE_TOOL, "gen_ai.tool.name": ev.tool}
    return {**attrs, **(error_attributes(error_type) if error_type else {})}


def tenant_attributes(tenant_id: str) -> Attributes:
    return {TENANT_ID: tenant_id}


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
