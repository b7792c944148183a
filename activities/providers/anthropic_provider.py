"""The Messages API over the official ``anthropic`` SDK.

SDK objects never leave this module: ``complete()`` takes and returns our own types, and
SDK exceptions become ApplicationErrors (see ``errors``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import anthropic
import httpx2
from anthropic import AsyncAnthropic, Omit, OpenTelemetryOptions, omit
from anthropic.types import (
    ContentBlockParam,
    Message,
    MessageParam,
    ToolChoiceAnyParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
)

from durable_agents.activities.providers import errors
from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelReply,
    ModelRequest,
    ProviderCall,
    TextSink,
    ToolSpec,
    Usage,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"

# Our finish reasons follow the Chat Completions vocabulary; anything unknown passes through.
_FINISH_REASONS = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

# The SDK traces its calls with OpenTelemetry. Passing the option explicitly stops
# ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content from putting prompts into spans.
_TELEMETRY: OpenTelemetryOptions = {"traces": {"content_mode": "metadata_only"}}

_Role = Literal["user", "assistant"]


class AnthropicProvider:
    """ModelProvider for Anthropic's Messages API."""

    name = "anthropic"

    def __init__(
        self,
        api_key: str,
        model: str,
        timeout: float,
        base_url: str | None = None,
    ) -> None:
        """Create the SDK client; no request is made until ``complete()``.

        ``model`` is used when a request names none.
        """
        self._model = model
        self._secrets = (api_key,)
        # Explicit base_url so ANTHROPIC_BASE_URL in the environment cannot redirect the key.
        self._client = AsyncAnthropic(
            api_key=api_key,
            base_url=base_url or DEFAULT_BASE_URL,
            timeout=timeout,
            # Temporal retries the activity; SDK retries would multiply attempts and hide them.
            max_retries=0,
            open_telemetry=_TELEMETRY,
        )

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Send one Messages API request; raise ApplicationError on any failure."""
        system, messages = _to_anthropic_messages(request.messages, self.name)
        tools = [_to_anthropic_tool(t) for t in request.tools]
        try:
            if request.on_text is None:
                message = await self._client.messages.create(
                    model=request.model or self._model,
                    max_tokens=request.max_output_tokens,
                    system=system if system else omit,
                    messages=messages,
                    tools=tools if tools else omit,
                    tool_choice=_choice(request, tools),
                    extra_headers={"Idempotency-Key": request.idempotency_key},
                )
            else:
                message = await self._streamed(request, system, messages, tools, request.on_text)
        except anthropic.APIStatusError as exc:
            if exc.status_code < 400:
                # An error event in the middle of a stream (overloaded, most often): the HTTP
                # status was already 200, so only its body says what went wrong.
                summary = errors.summarize_error_body(exc.body, self._secrets)
                raise errors.bad_response(self.name, f"error in stream: {summary}") from None
            raise errors.status_error(
                self.name,
                exc.status_code,
                body=exc.body,
                headers=exc.response.headers,
                secrets=self._secrets,
            ) from None
        except anthropic.APITimeoutError:
            raise errors.connection_error(self.name, timed_out=True) from None
        except anthropic.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else None
            raise errors.connection_error(self.name, timed_out=False, cause=cause) from None
        except httpx2.TimeoutException:
            # Mid-stream, the SDK lets its HTTP client's errors through unwrapped.
            raise errors.connection_error(self.name, timed_out=True) from None
        except httpx2.TransportError as exc:
            raise errors.connection_error(
                self.name, timed_out=False, cause=type(exc).__name__
            ) from None
        except (AttributeError, TypeError, ValueError, IndexError, RuntimeError, AssertionError):
            # The SDK's stream accumulator refuses events out of order or tool input that is
            # not JSON; the event's text is not repeated (untrusted).
            raise errors.bad_response(self.name, "malformed stream event") from None
        return _from_message(message)

    async def _streamed(
        self,
        request: ModelRequest,
        system: str,
        messages: list[MessageParam],
        tools: list[ToolParam],
        on_text: TextSink,
    ) -> Message:
        """The reply streamed through the SDK's helper, each text delta handed to `on_text`."""
        finished = False
        async with self._client.messages.stream(
            model=request.model or self._model,
            max_tokens=request.max_output_tokens,
            system=system if system else omit,
            messages=messages,
            tools=tools if tools else omit,
            tool_choice=_choice(request, tools),
            extra_headers={"Idempotency-Key": request.idempotency_key},
        ) as stream:
            async for event in stream:
                if event.type == "text":
                    await on_text(event.text)
                elif event.type == "message_stop":
                    finished = True
            message = await stream.get_final_message()
        if not finished:
            # The connection closed cleanly mid-reply: half a reply is not one.
            raise errors.bad_response(self.name, "the stream ended before the reply finished")
        return message

    async def aclose(self) -> None:
        """Close the SDK's HTTP connection pool."""
        await self._client.close()


def _to_anthropic_messages(
    messages: Iterable[ChatMessage], provider: str
) -> tuple[str, list[MessageParam]]:
    """Split out the system prompt and fold our messages into alternating user/assistant turns.

    The API wants tool results as blocks of a user turn, all results for one assistant turn
    in the next user turn, and no two turns of the same role in a row, so consecutive
    messages of one role are merged.
    """
    system: list[str] = []
    turns: list[tuple[_Role, list[ContentBlockParam]]] = []
    for message in messages:
        if message.role == "system":
            system.append(message.content)
            continue
        role: _Role = "assistant" if message.role == "assistant" else "user"
        blocks = _to_blocks(message, provider)
        if not blocks:
            # The API rejects empty turns; an empty message says nothing anyway.
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    params: list[MessageParam] = []
    for role, blocks in turns:
        if role == "assistant":
            params.append({"role": "assistant", "content": blocks})
        else:
            params.append({"role": "user", "content": blocks})
    return "\n\n".join(s for s in system if s), params


def _to_blocks(message: ChatMessage, provider: str) -> list[ContentBlockParam]:
    blocks: list[ContentBlockParam] = []
    if message.role == "tool":
        if not message.tool_call_id:
            raise errors.rejected_request(provider, "tool message without tool_call_id")
        result: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        if message.content:
            result["content"] = message.content
        return [result]
    # The API rejects empty text blocks.
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def _to_anthropic_tool(tool: ToolSpec) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _from_message(message: Message) -> ModelReply:
    texts: list[str] = []
    calls: list[ProviderCall] = []
    for block in message.content:
        if isinstance(block, ToolUseBlock):
            calls.append(
                ProviderCall(
                    # A compatible server may send no id (the SDK does not validate):
                    # call_model names calls itself; "" says there is nothing to echo.
                    id=block.id if isinstance(block.id, str) else "",
                    name=block.name,
                    # Normally an object already; a string or garbage is kept for the tool layer.
                    arguments=errors.parse_tool_arguments(block.input),
                )
            )
        elif block.type == "text":
            texts.append(block.text)
        # Thinking and server-tool blocks are not part of our reply.
    stop_reason = message.stop_reason or "end_turn"
    usage = message.usage
    # The API counts cached prompt tokens separately; the total input is their sum.
    input_tokens = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    return ModelReply(
        text="".join(texts),
        tool_calls=calls,
        finish_reason=_FINISH_REASONS.get(stop_reason, stop_reason),
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=usage.output_tokens,
            # Tokens written to the cache are priced as input here (cache writes cost more
            # at Anthropic: a table that wants that exact prices them into `input`).
            cached_tokens=usage.cache_read_input_tokens or 0,
        ),
        model=message.model or "",
    )


def _choice(request: ModelRequest, tools: list[ToolParam]) -> ToolChoiceAnyParam | Omit:
    """ "any" (call one of the tools) when the request requires a call; else the default."""
    return {"type": "any"} if request.call_required and tools else omit
