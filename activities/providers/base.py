"""The provider interface: our own small message types in, our own reply out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]
# Hears each piece of the reply's text as it arrives (token deltas for live viewers).
TextSink = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class ProviderCall:
    """A tool call requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str
    tool_calls: tuple[ProviderCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    model: str
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    # Stable across retries; providers that support it forward it so the vendor can dedupe.
    idempotency_key: str
    max_output_tokens: int = 2048
    # "chat" for a step of the loop, "compaction" when asked to summarise the conversation.
    purpose: str = "chat"
    # The reply must call one of `tools` (the turn it answers asks for a call): sent as the
    # provider's "call a tool" choice, or as grammar mode's call-only schema.
    call_required: bool = False
    # Tools of `tools` the reply may not call (its latest call of each repeated the one
    # before it, result and all): grammar mode leaves them out of the reply's schema, the
    # prompt unchanged; other providers are not asked.
    withheld: tuple[str, ...] = ()
    # Given: the provider streams the reply and awaits this with each piece of its text, in
    # order, still returning the whole reply. The pieces are a preview only: the reply
    # returned (text-tool-call parsing, echo stripping applied) is the record.
    on_text: TextSink | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Usage:
    """As the provider reported it. `input_tokens` counts every prompt token, cached ones
    too; `cached_tokens` is the part of them read from the provider's prompt cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


@dataclass(frozen=True)
class ModelReply:
    text: str
    tool_calls: list[ProviderCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = Usage()
    model: str = ""


class ModelProvider(Protocol):
    """Anything that turns a ModelRequest into a ModelReply.

    Implementations raise ProviderError (providers/failure.py) for failures, retryable or
    not, so that Temporal (not the SDK) owns retries.
    """

    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...

    async def aclose(self) -> None: ...
