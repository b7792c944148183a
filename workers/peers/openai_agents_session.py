"""The OpenAI Agents SDK's `Session` protocol, kept in AgentState.

    from agents import Agent, Runner
    from durable_agents.workers.peers.openai_agents_session import AgentStateSession

    session = AgentStateSession("user-42", tenant="acme")
    await Runner.run(agent, "What did I ask before?", session=session)

Items are stored as workers/peers/external_history.py says: user and system messages as
user_message, the model's messages and reasoning as assistant_message, function calls
(and the SDK's hosted tool calls) as tool_call, their outputs as tool_result with a large
output in S3 by reference; get_items returns each item as it was added. The session shows
in `agentctl sessions`/`show`/`watch` under agent `external:openai-agents`; its AgentState
id is `session.agentstate_id`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.peers.claim_check import ClaimCheckStore
from durable_agents.workers.peers.external_history import Entry, ExternalHistory, call_arguments
from durable_agents.workers.settings import get_settings

if TYPE_CHECKING:
    import uuid

    from agents.items import TResponseInputItem

SDK = "openai-agents"


class AgentStateSession:
    """An Agents SDK session stored in AgentState for `tenant` (default: AGENT_TENANT_ID).

    `store`: the S3 store and database to use (a ClaimCheckStore, shared with a
    ClaimCheckPlugin if there is one); opened from the environment (DATABASE_URL, S3_*)
    when not given, and closed by `aclose`."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        tenant: str | None = None,
        store: ClaimCheckStore | None = None,
        session_settings: SessionSettings | None = None,
        title: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self._history = ExternalHistory(
            session_id,
            tenant=tenant or get_settings().agent.tenant_id,
            sdk=SDK,
            store=store,
            title=title,
        )

    @property
    def agentstate_id(self) -> uuid.UUID:
        """The session's id in AgentState (what `agentctl show` and the gateway take)."""
        return self._history.id

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation, oldest first; with `limit` (or the settings' limit), its
        newest `limit` items."""
        resolved = resolve_session_limit(limit, self.session_settings)
        if resolved is not None and resolved < 0:
            resolved = None  # as SQLiteSession: a negative limit is no limit
        stored = await self._history.load(resolved)
        return [cast("TResponseInputItem", s.payload) for s in stored]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await self._history.append([entry_of(_as_dict(item)) for item in items])

    async def pop_item(self) -> TResponseInputItem | None:
        stored = await self._history.pop()
        return None if stored is None else cast("TResponseInputItem", stored.payload)

    async def clear_session(self) -> None:
        await self._history.clear()

    async def aclose(self) -> None:
        await self._history.aclose()


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if dump is None:
        raise TypeError(f"a session item must be a dict, got {type(item).__name__}")
    return cast("dict[str, Any]", dump(exclude_unset=True))


def _text(content: Any) -> str:
    """What our readers show of a message's content: its text parts, a word for others."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        text = part.get("text") or part.get("refusal")
        pieces.append(str(text) if text is not None else f"[{part.get('type', 'part')}]")
    return "\n".join(pieces)


def entry_of(item: dict[str, Any]) -> Entry:
    """How one Agents SDK item is stored (its kind from `type` and `role`)."""
    kind = str(item.get("type") or "message")
    role = str(item.get("role") or "")
    if kind == "function_call_output" or kind.endswith("_call_output"):
        output = item.get("output")
        return Entry(
            ItemKind.TOOL_RESULT,
            "tool",
            output if isinstance(output, str) else _text(output),
            item,
            tool_call_id=item.get("call_id"),
            detach="output",
        )
    if kind == "function_call" or kind.endswith("_call"):
        return Entry(
            ItemKind.TOOL_CALL,
            "assistant",
            "",
            item,
            tool_call_id=item.get("call_id") or item.get("id"),
            tool_name=item.get("name") or kind,
            arguments=call_arguments(item.get("arguments", {})),
        )
    if kind == "reasoning":
        summary = item.get("summary") or []
        return Entry(ItemKind.ASSISTANT_MESSAGE, "assistant", _text(summary), item)
    if kind == "message" and role in ("user", "system", "developer"):
        return Entry(ItemKind.USER_MESSAGE, role, _text(item.get("content")), item)
    return Entry(ItemKind.ASSISTANT_MESSAGE, role or "assistant", _text(item.get("content")), item)
