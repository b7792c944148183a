"""A Chat Completions request in grammar tool mode (activities/providers/tool_grammar.py).

No ``tools`` field: the tools are described at the end of the system prompt, earlier calls
and answers appear as the JSON the model writes in this mode, tool results as user
messages, and ``response_format`` carries the reply's schema. llama.cpp's server turns that
schema into a grammar for the whole reply (tools/server: ``response_format`` json_schema,
common/chat.cpp); so do vLLM, Ollama and LM Studio.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openai.types.chat import ChatCompletionMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema

from durable_agents.activities.providers.base import ChatMessage, ModelRequest, ToolSpec
from durable_agents.activities.providers.server_probe import serves_llama_cpp
from durable_agents.activities.providers.tool_grammar import (
    GrammarTools,
    LeftOut,
    ToolMode,
    answer_json,
    call_json,
    grammar_tools,
    result_text,
)

logger = logging.getLogger(__name__)

# The name response_format gives the schema (OpenAI requires one; llama.cpp ignores it).
SCHEMA_NAME = "tool_call_or_answer"


class GrammarMode:
    """One provider's tool mode: fixed, or (auto) learned from the server at the first
    request that offers tools. Notes each tool it leaves out once, in the log."""

    def __init__(self, mode: ToolMode, base_url: str | None, api_key: str | None) -> None:
        self._base_url = base_url
        self._api_key = api_key
        # None until auto has learned which server this is; api.openai.com constrains
        # calls itself (strict tools), so auto is native there.
        self._grammar: bool | None = {"native": False, "grammar": True}.get(mode)
        if mode == "auto" and not base_url:
            self._grammar = False
        self._noted: set[LeftOut] = set()

    async def shape(self, request: ModelRequest) -> GrammarRequest | None:
        """``request`` in grammar mode; None to send it as is (native, or no tools)."""
        if not request.tools or not await self._uses_grammar():
            return None
        shaped = grammar_request(
            request.messages, request.tools, request.call_required, request.withheld
        )
        for tool in set(shaped.tools.left_out) - self._noted:
            # The operator's note (the model is not told of a tool it cannot call).
            logger.warning(
                "tool %r is left out of grammar-mode requests: %s", tool.name[:64], tool.reason
            )
            self._noted.add(tool)
        return shaped

    async def _uses_grammar(self) -> bool:
        if self._grammar is None and self._base_url:
            found = await serves_llama_cpp(self._base_url, self._api_key)
            if found is None:
                return False  # unreachable now (so is its chat endpoint): ask again
            self._grammar = found
        return bool(self._grammar)


@dataclass(frozen=True)
class GrammarRequest:
    messages: list[ChatCompletionMessageParam]
    # None when no offered tool fits: the request then offers none.
    response_format: ResponseFormatJSONSchema | None
    tools: GrammarTools


def grammar_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    call_required: bool = False,
    withheld: Sequence[str] = (),
) -> GrammarRequest:
    """The request's messages and reply schema in grammar mode.

    The reply must call a tool when ``call_required`` and until the conversation holds a
    tool result: a small model offered the answer first answers from the task's words alone
    (Qwen2.5-Coder 0.5B answered "mascot" to "find the mascot's name in docs/", without a
    call, in most runs). The ``withheld`` tools are left out of the schema, unless that would
    leave a reply that must call nothing to call. Only the schema differs, so the prompt's
    cached prefix stays."""
    offered = grammar_tools(tools)
    response_format: ResponseFormatJSONSchema | None = None
    may_answer = not call_required and any(m.role == "tool" for m in messages)
    schema = without(offered.schema if may_answer else offered.call_schema, withheld)
    if schema is not None:
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "schema": schema},
        }
    return GrammarRequest(grammar_messages(messages, offered.prompt), response_format, offered)


def without(schema: dict[str, Any] | None, withheld: Sequence[str]) -> dict[str, Any] | None:
    """``schema`` (each alternative a tool, or the answer) without the ``withheld`` tools'
    alternatives, taken out in their order while one is left (a reply that must call has a
    tool to call)."""
    if schema is None or not withheld:
        return schema
    kept = list(schema["anyOf"])
    for tool in withheld:
        left = [a for a in kept if _tool_of(a) != tool]
        kept = left or kept
    return {**schema, "anyOf": kept}


def _tool_of(alternative: dict[str, Any]) -> object:
    return alternative.get("properties", {}).get("tool", {}).get("const")


def grammar_messages(
    messages: Sequence[ChatMessage], tools_prompt: str
) -> list[ChatCompletionMessageParam]:
    """``messages`` as the model sees them in grammar mode, ``tools_prompt`` ending the
    first system message (or a system message of its own when there is none)."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    out: list[ChatCompletionMessageParam] = []
    results: list[str] = []
    prompted = False

    def flush() -> None:
        # A reply's results, one user message: templates that want roles to alternate
        # (and servers that check it) see no two tool results in a row.
        if results:
            out.append({"role": "user", "content": "\n\n".join(results)})
            results.clear()

    for message in messages:
        if message.role == "tool":
            results.append(result_text(names.get(message.tool_call_id or ""), message.content))
            continue
        flush()
        if message.role == "system":
            content = message.content
            if not prompted and tools_prompt:
                content = f"{content}\n\n{tools_prompt}" if content else tools_prompt
                prompted = True
            out.append({"role": "system", "content": content})
        elif message.role == "user":
            out.append({"role": "user", "content": message.content})
        elif message.tool_calls:
            # Only the calls: a reply in this mode is a call or an answer, never both (text
            # beside calls comes from a step in native mode, e.g. "I'll read the file").
            written = "\n".join(call_json(call) for call in message.tool_calls)
            out.append({"role": "assistant", "content": written})
        else:
            out.append({"role": "assistant", "content": answer_json(message.content)})
    flush()
    if not prompted and tools_prompt:
        out.insert(0, {"role": "system", "content": tools_prompt})
    return out
