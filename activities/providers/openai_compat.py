"""Chat Completions over the official ``openai`` SDK, for OpenAI and compatible servers.

SDK objects never leave this module: ``complete()`` takes and returns our own types, and
SDK exceptions become ApplicationErrors (see ``errors``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import openai
from openai import AsyncOpenAI, Omit, omit
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageCustomToolCall,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionMessageToolCallUnion,
)
from openai.types.shared_params import FunctionDefinition, ResponseFormatJSONSchema

from durable_agents.activities.providers import errors
from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelReply,
    ModelRequest,
    ProviderCall,
    ToolSpec,
    Usage,
)
from durable_agents.activities.providers.context_window import DiscoveredWindow, discover_window
from durable_agents.activities.providers.openai_grammar import GrammarMode
from durable_agents.activities.providers.openai_stream import StreamedReply, read_stream, usage_of
from durable_agents.activities.providers.strict_schema import strict_compatible
from durable_agents.activities.providers.text_tool_calls import read_reply_text
from durable_agents.activities.providers.tool_grammar import (
    AnswerPreview,
    ToolMode,
    read_constrained,
)
from durable_agents.vocabulary.non_answers import CUT_FINISH_REASONS

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Keyless local servers (vLLM, llama.cpp, Ollama) still need *some* key for the SDK; an
# explicit placeholder also stops the SDK from picking up OPENAI_API_KEY from the
# environment and sending it to a third-party base_url.
_NO_KEY = "no-key"

# Which field carries the reply budget. OpenAI deprecated max_tokens and its reasoning
# models refuse it; llama.cpp, older vLLM and Ollama only know max_tokens. "auto" sends
# max_completion_tokens to OpenAI itself and both fields to any other server (each server
# reads the one it knows; those that know both take the same number from each).
MaxTokensField = Literal["auto", "max_completion_tokens", "max_tokens", "both"]
# An assistant turn that only calls tools: "" as its content (some chat templates fail
# without one: HTTP 500 from llama-cpp-python) or no content at all (for servers that
# reject "").
AssistantToolContent = Literal["empty", "omit"]
StrictTools = Literal["auto", "off"]


class OpenAICompatibleProvider:
    """ModelProvider for the Chat Completions API (OpenAI or any compatible server)."""

    name = "openai"

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout: float,
        *,
        max_tokens_field: MaxTokensField = "auto",
        assistant_tool_content: AssistantToolContent = "empty",
        strict_tools: StrictTools = "auto",
        tool_mode: ToolMode = "native",
        temperature: float | None = None,
    ) -> None:
        """Create the SDK client; no request is made until ``complete()``.

        ``base_url`` defaults to OpenAI's; ``model`` is used when a request names none.
        ``tool_mode`` (activities/providers/tool_grammar.py): "grammar" offers tools in the
        prompt and holds the reply to one call or an answer; "auto" does that when the
        server is llama.cpp's (asked at the first request with tools), native otherwise.
        ``temperature`` is sent with every request when set (the server's default otherwise).
        """
        self._model = model
        self._temperature: float | Omit = omit if temperature is None else temperature
        self._budget_fields = budget_fields(max_tokens_field, base_url)
        self._empty_content = assistant_tool_content == "empty"
        self._strict = strict_tools == "auto"
        self._base_url = base_url
        self._secrets = (api_key,) if api_key else ()
        self._grammar = GrammarMode(tool_mode, base_url, api_key)
        # Explicit base_url so OPENAI_BASE_URL in the environment cannot redirect the key.
        self._client = AsyncOpenAI(
            base_url=base_url or DEFAULT_BASE_URL,
            api_key=api_key or _NO_KEY,
            timeout=timeout,
            # Temporal retries the activity; SDK retries would multiply attempts and hide them.
            max_retries=0,
        )

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Send one chat-completions request; raise ApplicationError on any failure."""
        shaped = await self._grammar.shape(request)
        if shaped is None:
            messages = [
                _to_openai_message(m, self.name, self._empty_content) for m in request.messages
            ]
            tools = [_to_openai_tool(t, self._strict) for t in request.tools]
            schema: ResponseFormatJSONSchema | Omit = omit
            sink = request.on_text
        else:
            messages, tools, schema = shaped.messages, [], shaped.response_format or omit
            sink = request.on_text
            if sink is not None and shaped.response_format is not None:
                sink = AnswerPreview(sink)  # the answer's words, not its JSON
        budget = request.max_output_tokens
        asked = _Asked.of(request, constrained=schema is not omit)
        # Some compatible servers reject an empty tools list, so it is left out; "auto" is
        # the API's default, but some compatible servers only use tools when told.
        chosen: Literal["auto", "required"] | Omit = omit
        if tools:
            chosen = "required" if request.call_required else "auto"
        max_completion = budget if "max_completion_tokens" in self._budget_fields else omit
        max_tokens = budget if "max_tokens" in self._budget_fields else omit
        headers = {"Idempotency-Key": request.idempotency_key}
        try:
            if sink is None:
                completion = await self._client.chat.completions.create(
                    model=request.model or self._model,
                    messages=messages,
                    tools=tools or omit,
                    tool_choice=chosen,
                    response_format=schema,
                    max_completion_tokens=max_completion,
                    max_tokens=max_tokens,
                    temperature=self._temperature,
                    extra_headers=headers,
                )
                return _from_completion(completion, self.name, asked)
            stream = await self._client.chat.completions.create(
                model=request.model or self._model,
                messages=messages,
                tools=tools or omit,
                tool_choice=chosen,
                response_format=schema,
                max_completion_tokens=max_completion,
                max_tokens=max_tokens,
                temperature=self._temperature,
                extra_headers=headers,
                stream=True,
                # Without it a stream carries no token counts.
                stream_options={"include_usage": True},
            )
            # Closed however the read ends: a cancelled call must not leave the server
            # generating into an open connection.
            async with stream:
                streamed = await read_stream(stream, sink)
        except openai.APIStatusError as exc:
            raise errors.status_error(
                self.name,
                exc.status_code,
                body=exc.body,
                headers=exc.response.headers,
                secrets=self._secrets,
            ) from None
        except openai.APITimeoutError:
            raise errors.connection_error(self.name, timed_out=True) from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else None
            raise errors.connection_error(self.name, timed_out=False, cause=cause) from None
        except openai.APIError as exc:
            # An error event in the middle of a stream (the HTTP status was already 200).
            summary = errors.summarize_error_body(exc.body, self._secrets)
            raise errors.bad_response(self.name, f"error in stream: {summary}") from None
        except (AttributeError, TypeError, ValueError):
            # A chunk that is not JSON or not a chunk; its text is not repeated (untrusted).
            raise errors.bad_response(self.name, "malformed stream chunk") from None
        return _from_stream(streamed, self.name, asked)

    async def context_window(self) -> DiscoveredWindow | None:
        """The window a compatible server advertises; api.openai.com advertises none."""
        if not self._base_url:
            return None
        key = self._secrets[0] if self._secrets else None
        return await discover_window(self._base_url, key, self._model)

    async def aclose(self) -> None:
        """Close the SDK's HTTP connection pool."""
        await self._client.close()


def budget_fields(choice: MaxTokensField, base_url: str | None) -> frozenset[str]:
    """The request fields that carry the reply budget for this setting and server."""
    if choice == "auto":
        openai_itself = not base_url or base_url.rstrip("/") == DEFAULT_BASE_URL
        choice = "max_completion_tokens" if openai_itself else "both"
    if choice == "both":
        return frozenset({"max_completion_tokens", "max_tokens"})
    return frozenset({choice})


def _to_openai_message(
    message: ChatMessage, provider: str, empty_content: bool
) -> ChatCompletionMessageParam:
    if message.role == "system":
        return {"role": "system", "content": message.content}
    if message.role == "user":
        return {"role": "user", "content": message.content}
    if message.role == "tool":
        if not message.tool_call_id:
            raise errors.rejected_request(provider, "tool message without tool_call_id")
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content}
    calls = [_to_openai_tool_call(c) for c in message.tool_calls]
    if message.content or empty_content:
        return {"role": "assistant", "content": message.content, "tool_calls": calls}
    return {"role": "assistant", "tool_calls": calls}


def _to_openai_tool_call(call: ProviderCall) -> ChatCompletionMessageFunctionToolCallParam:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": _arguments_json(call.arguments)},
    }


def _arguments_json(arguments: dict[str, Any]) -> str:
    # Always a JSON object, malformed arguments too (as {"_raw": "what the model wrote"}):
    # servers that render the conversation through the model's chat template parse them,
    # and llama.cpp answers HTTP 500 to every later step of a task that echoes invalid JSON
    # (found by the real-model tier: the task waited on the model for good).
    return json.dumps(arguments)


def _to_openai_tool(tool: ToolSpec, strict: bool) -> ChatCompletionFunctionToolParam:
    function: FunctionDefinition = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    if strict and strict_compatible(tool.parameters):
        # api.openai.com then decodes the call within the schema; llama.cpp's server does
        # that for every offered tool once the model opens its call tag, with or without it.
        function["strict"] = True
    return {"type": "function", "function": function}


@dataclass(frozen=True)
class _Asked:
    """What a reply written as text is read against: the tools offered and the tool results
    the model was shown (a block repeating one is an echo)."""

    offered: list[str]
    shown: list[str]
    # The reply was held to tool_grammar's schema: read as one call or one answer.
    constrained: bool = False

    @classmethod
    def of(cls, request: ModelRequest, *, constrained: bool = False) -> _Asked:
        return cls(
            offered=[t.name for t in request.tools],
            shown=[m.content for m in request.messages if m.role == "tool"],
            constrained=constrained,
        )


def _from_completion(completion: ChatCompletion, provider: str, asked: _Asked) -> ModelReply:
    if not completion.choices:
        raise errors.bad_response(provider, "no choices")
    choice = completion.choices[0]
    message = choice.message
    usage = completion.usage
    return _reply(
        message.content or message.refusal or "",
        list(_from_tool_calls(message.tool_calls or ())),
        choice.finish_reason,
        usage_of(usage),
        completion.model or "",
        asked,
    )


def _from_stream(streamed: StreamedReply, provider: str, asked: _Asked) -> ModelReply:
    if streamed.chunks == 0:
        raise errors.bad_response(provider, "an empty stream")
    if streamed.finish_reason is None:
        # The connection closed cleanly mid-reply (no [DONE] either): half a reply is not one.
        raise errors.bad_response(provider, "the stream ended before the reply finished")
    calls = [
        ProviderCall(id=cid, name=name, arguments=errors.parse_tool_arguments(arguments))
        for cid, name, arguments in streamed.calls
    ]
    return _reply(
        streamed.text or streamed.refusal,
        calls,
        streamed.finish_reason,
        streamed.usage or Usage(),
        streamed.model,
        asked,
    )


def _reply(
    text: str,
    tool_calls: list[ProviderCall],
    finish_reason: str | None,
    usage: Usage,
    model: str,
    asked: _Asked,
) -> ModelReply:
    """Our reply from what the server sent, whole or streamed: the same reading of both."""
    constrained = (
        read_constrained(text, cut=finish_reason == "length")
        if asked.constrained and not tool_calls
        else None
    )
    if constrained is not None:
        # The model chose between a call and an answer: an answer is not searched for calls.
        tool_calls, text = constrained.calls, constrained.text
    elif not tool_calls and text:
        # A server that did not parse the model's tool-call text returns it as the answer.
        written = read_reply_text(
            text,
            asked.offered,
            asked.shown,
            cut=finish_reason in CUT_FINISH_REASONS,
        )
        tool_calls, text = written.calls, written.text
    # Compatible servers may not validate; fall back rather than fail on a missing field.
    finish = finish_reason or "stop"
    if tool_calls and finish == "stop":
        # Some compatible servers say "stop" even when they return tool calls.
        finish = "tool_calls"
    return ModelReply(
        text=text, tool_calls=tool_calls, finish_reason=finish, usage=usage, model=model
    )


def _from_tool_calls(
    calls: Iterable[ChatCompletionMessageToolCallUnion],
) -> Iterable[ProviderCall]:
    for call in calls:
        # Compatible servers may send no id, or not a string (the SDK does not validate);
        # call_model names calls itself, and "" says there is nothing here to echo back.
        call_id = call.id if isinstance(call.id, str) else ""
        if isinstance(call, ChatCompletionMessageCustomToolCall):
            # Custom (free-text) tools are never offered, so this is the model misbehaving;
            # keep the call so the tool layer answers it with an error instead of losing it.
            yield ProviderCall(
                id=call_id,
                name=call.custom.name,
                arguments={errors.RAW_ARGUMENTS_KEY: call.custom.input},
            )
        else:
            yield ProviderCall(
                id=call_id,
                name=call.function.name,
                arguments=errors.parse_tool_arguments(call.function.arguments),
            )
