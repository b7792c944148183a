"""A streamed Chat Completions reply, put back together from its chunks.

Read from ``create(stream=True)`` rather than the SDK's ``.stream()`` helper: the helper
indexes choices and tool calls by the ``index`` each chunk claims and raises IndexError when
a compatible server leaves one out or starts past zero; here a chunk is read for what it
has. Chunks are built by the SDK without validation, so any field may be missing or of the
wrong type: the reader checks each one it uses, and the caller maps what is left
(AttributeError, TypeError, ValueError) to a bad response.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletionChunk

from durable_agents.activities.providers.base import TextSink, Usage


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamedReply:
    """What the chunks of one reply added up to, before our own reading of it."""

    text: str = ""
    refusal: str = ""
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, arguments)
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str = ""
    chunks: int = 0


def usage_of(usage: object) -> Usage:
    """A Chat Completions `usage` object (streamed or not) as ours. Cached prompt tokens are
    OpenAI's `prompt_tokens_details.cached_tokens` (llama.cpp's server reports the same
    field); a server that omits them cached nothing we can count."""
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    return Usage(
        input_tokens=_int(getattr(usage, "prompt_tokens", 0)),
        output_tokens=_int(getattr(usage, "completion_tokens", 0)),
        cached_tokens=_int(getattr(details, "cached_tokens", 0)),
    )


async def read_stream(
    stream: AsyncIterable[ChatCompletionChunk], on_text: TextSink
) -> StreamedReply:
    """Accumulate the chunks of the first choice, awaiting ``on_text`` with each text piece."""
    text: list[str] = []
    refusal: list[str] = []
    calls: dict[object, _Call] = {}
    reply = StreamedReply()
    async for chunk in stream:
        reply.chunks += 1
        if isinstance(chunk.model, str) and chunk.model:
            reply.model = chunk.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            reply.usage = usage_of(usage)
        for choice in chunk.choices or ():
            if _int(getattr(choice, "index", 0)) != 0:
                continue  # we ask for one choice; a second one is not ours to merge
            delta = getattr(choice, "delta", None)
            if delta is not None:
                piece = getattr(delta, "content", None)
                if isinstance(piece, str) and piece:
                    text.append(piece)
                    await on_text(piece)
                said_no = getattr(delta, "refusal", None)
                if isinstance(said_no, str):
                    refusal.append(said_no)
                for call in getattr(delta, "tool_calls", None) or ():
                    _add_call(calls, call)
            finish = getattr(choice, "finish_reason", None)
            if isinstance(finish, str) and finish:
                reply.finish_reason = finish
    reply.text = "".join(text)
    reply.refusal = "".join(refusal)
    reply.calls = [(c.id, c.name, "".join(c.arguments)) for c in calls.values()]
    return reply


def _add_call(calls: dict[object, _Call], chunk: Any) -> None:
    """Fold one tool-call delta in: by its index, else by its id, else into the last call."""
    call_id = getattr(chunk, "id", None)
    index = getattr(chunk, "index", None)
    if isinstance(index, int):
        key: object = index
    elif isinstance(call_id, str) and call_id:
        key = ("id", call_id)
    elif calls:
        key = next(reversed(calls))
    else:
        key = 0
    call = calls.setdefault(key, _Call())
    if isinstance(call_id, str) and call_id and not call.id:
        call.id = call_id
    function = getattr(chunk, "function", None)
    if function is None:
        return
    name = getattr(function, "name", None)
    if isinstance(name, str) and name and not call.name:
        # Some servers repeat the name on every delta; the first one is the name.
        call.name = name
    arguments = getattr(function, "arguments", None)
    if isinstance(arguments, str):
        call.arguments.append(arguments)
    elif arguments is not None:
        # A server that sends the arguments as an object sends them whole.
        call.arguments.append(json.dumps(arguments, default=str))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
