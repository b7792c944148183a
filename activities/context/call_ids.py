"""Tool call ids: ours for everything we do, the provider's only to echo back to it.

A model's call ids are untrusted text: some models reuse `call_0` at every step, repeat one
within a reply, or send none. Items, idempotency keys, approvals and workflow history use our
own id, `call_{step}_{index}`: unique within a session (a session's steps never repeat) and
derived again the same way by a retried model call. The provider's id is kept in the
tool_call item (AgentState only) and sent back in the assistant message and the result, so
the provider sees the conversation it wrote, except where its id would be ambiguous or
refused (empty, too long, used earlier in the conversation): there ours stands in.
"""

from __future__ import annotations

from typing import Any

# Key of the provider's id in a tool_call item's data. Items written before it existed
# carry the provider's id as their tool_call_id and have no such key.
PROVIDER_ID_KEY = "provider_call_id"
# Longer ids are not kept: no provider needs one, and each is re-sent at every step.
MAX_PROVIDER_ID_CHARS = 128


def our_call_id(step: int, index: int) -> str:
    """The id of the `index`-th call the model asked for at `step`."""
    return f"call_{step}_{index}"


def provider_id_to_keep(provider_id: str | None) -> str | None:
    """What a tool_call item keeps of the provider's id: None when there is nothing to echo."""
    if not provider_id or len(provider_id) > MAX_PROVIDER_ID_CHARS:
        return None
    return provider_id


def provider_id_of(tool_call_id: str, data: dict[str, Any]) -> str | None:
    """The provider's id of a stored call (its own id on items from before ours existed)."""
    if PROVIDER_ID_KEY in data:
        kept = data[PROVIDER_ID_KEY]
        return str(kept) if kept else None
    return tool_call_id


class EchoIds:
    """The ids one assembled conversation shows the provider, unique within it, in order."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def assign(self, our_id: str, provider_id: str | None) -> str:
        """The provider's id if it is still free in this conversation, else ours."""
        candidate = provider_id if provider_id and provider_id not in self._used else our_id
        # Ours is taken only if the provider used an id shaped like ours elsewhere.
        suffix = 0
        while candidate in self._used:
            suffix += 1
            candidate = f"{our_id}_{suffix}"
        self._used.add(candidate)
        return candidate
