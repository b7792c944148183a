"""pydantic-ai's message history, kept in AgentState.

    from pydantic_ai import Agent
    from durable_agents.workers.peers.pydantic_ai_history import AgentStateHistory

    history = AgentStateHistory("user-42", tenant="acme")
    result = await agent.run("What did I ask before?", message_history=await history.load())
    await history.append(result.new_messages())

Each part of each message is one item (workers/peers/external_history.py): system and user
prompts as user_message, text and thinking as assistant_message, tool calls as tool_call,
tool returns (and a retry sent back to a tool) as tool_result with a large return in S3 by
reference. Messages are (de)serialised with ModelMessagesTypeAdapter, so load() gives back
the messages append() was given. The session shows under agent `external:pydantic-ai`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.peers.claim_check import ClaimCheckStore
from durable_agents.workers.peers.external_history import Entry, ExternalHistory, call_arguments
from durable_agents.workers.settings import get_settings

SDK = "pydantic-ai"
# Where a message's own fields (all but its parts) ride: on its first part's row.
_MESSAGE = "_message"


class AgentStateHistory:
    """A pydantic-ai conversation stored in AgentState for `tenant` (default:
    AGENT_TENANT_ID); `store` as for workers.peers.openai_agents_session.AgentStateSession."""

    def __init__(
        self,
        session_id: str,
        *,
        tenant: str | None = None,
        store: ClaimCheckStore | None = None,
        title: str | None = None,
    ) -> None:
        self.session_id = session_id
        self._history = ExternalHistory(
            session_id,
            tenant=tenant or get_settings().agent.tenant_id,
            sdk=SDK,
            store=store,
            title=title,
        )

    @property
    def agentstate_id(self) -> uuid.UUID:
        return self._history.id

    async def load(self) -> list[ModelMessage]:
        """The conversation so far (empty for a new session), for `message_history=`."""
        messages: list[dict[str, Any]] = []
        current: str | None = None
        for stored in await self._history.load():
            part = dict(stored.payload)
            envelope = part.pop(_MESSAGE, None)
            if stored.extra.get("message") != current or envelope is not None:
                current = stored.extra.get("message")
                messages.append({**(envelope or {}), "parts": []})
            if stored.extra.get("part", 0) >= 0:
                messages[-1]["parts"].append(part)
        return ModelMessagesTypeAdapter.validate_python(messages)

    async def append(self, messages: Sequence[ModelMessage]) -> None:
        """Store `messages` (e.g. a run's `result.new_messages()`) after the conversation."""
        dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
        entries: list[Entry] = []
        for message in dumped:
            key = uuid.uuid4().hex
            envelope = {k: v for k, v in message.items() if k != "parts"}
            parts: list[dict[str, Any]] = message["parts"]
            request = message.get("kind") == "request"
            if not parts:
                kind = ItemKind.USER_MESSAGE if request else ItemKind.ASSISTANT_MESSAGE
                role = "user" if request else "assistant"
                extra = {"message": key, "part": -1}
                entries.append(Entry(kind, role, "", {_MESSAGE: envelope}, extra=extra))
            for n, part in enumerate(parts):
                payload = {**part, _MESSAGE: envelope} if n == 0 else part
                entries.append(_entry(payload, request, {"message": key, "part": n}))
        await self._history.append(entries)

    async def clear(self) -> None:
        await self._history.clear()

    async def aclose(self) -> None:
        await self._history.aclose()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c if isinstance(c, str) else f"[{_kind_of(c)}]" for c in content)
    return json.dumps(content, ensure_ascii=False)


def _kind_of(value: Any) -> str:
    return str(value.get("kind", "content")) if isinstance(value, dict) else "content"


def _entry(payload: dict[str, Any], request: bool, extra: dict[str, Any]) -> Entry:
    """How one part is stored (its kind from `part_kind`)."""
    kind = str(payload.get("part_kind", ""))
    call_id, name = payload.get("tool_call_id"), payload.get("tool_name")
    content = payload.get("content")
    if kind in ("tool-return", "builtin-tool-return") or (kind == "retry-prompt" and name):
        return Entry(
            ItemKind.TOOL_RESULT,
            "tool",
            _text(content),
            payload,
            tool_call_id=call_id,
            tool_name=name,
            detach="content",
            extra=extra,
        )
    if kind in ("tool-call", "builtin-tool-call"):
        return Entry(
            ItemKind.TOOL_CALL,
            "assistant",
            "",
            payload,
            tool_call_id=call_id,
            tool_name=name,
            arguments=call_arguments(payload.get("args")),
            extra=extra,
        )
    if kind == "system-prompt":
        return Entry(ItemKind.USER_MESSAGE, "system", _text(content), payload, extra=extra)
    if request:
        return Entry(ItemKind.USER_MESSAGE, "user", _text(content), payload, extra=extra)
    text = _text(content) if content is not None else f"[{kind}]"
    return Entry(ItemKind.ASSISTANT_MESSAGE, "assistant", text, payload, extra=extra)
