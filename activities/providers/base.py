"""The provider interface: our own small message types in, our own reply out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


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


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class ModelReply:
    text: str
    tool_calls: list[ProviderCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = Usage()
    model: str = ""


class ModelProvider(Protocol):
    """Anything that turns a ModelRequest into a ModelReply.

    Implementations raise temporalio ApplicationError for failures, retryable or not,
    so that Temporal (not the SDK) owns retries.
    """

    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...

    async def aclose(self) -> None: ...
