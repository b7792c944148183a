"""A model request's fingerprint: 128 bits of the sha256 of a canonical JSON of what was sent
(the model, each message's role, content, tool calls and call id, the tool specs), as 22
base64url characters. A reply commits it (`request` in its item's data, ~35 B a step), so a
replay can tell whether it is about to send the same request again (activities/replays.py)
without storing the request itself. It is only ever compared with the fingerprint of the
same step of one recorded session: 128 bits leave no room for a false match."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from durable_agents.activities.providers.base import ChatMessage, ModelRequest, ToolSpec

# The key of the fingerprint in an assistant item's data.
REQUEST_KEY = "request"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _message(message: ChatMessage) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
    }


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}


def request_fingerprint(request: ModelRequest) -> str:
    """The fingerprint of the request's model, messages, tool specs, whether it asks for a
    call and the tools it withholds. The idempotency
    key, the reply's token limit and the purpose are not part of it: they do not change
    what the model is asked."""
    body: dict[str, object] = {
        "model": request.model,
        "messages": [_message(m) for m in request.messages],
        "tools": [_tool(t) for t in request.tools],
    }
    if request.call_required and request.tools:
        body["call_required"] = True  # absent otherwise: earlier fingerprints stay as made
    if request.withheld and request.tools:
        body["withheld"] = list(request.withheld)  # absent otherwise, as call_required
    digest = hashlib.sha256(_canonical(body).encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
