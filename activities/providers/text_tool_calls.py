"""Tool calls a model wrote as text instead of returning them natively.

Small local models served without a tool-call parser (or with one that does not know their
format) answer a tool call as text: Hermes/Qwen ``<tool_call>{...}</tool_call>`` tags, or a
bare ``{"name": ..., "arguments": ...}`` object, often inside a ```json fence. Taken as the
final answer, that text would end the task with a tool call as its result.

Pure functions, no I/O. What a model wrote is untrusted: anything malformed becomes a call
whose arguments are kept raw (``RAW_ARGUMENTS_KEY``), which the tool layer reports back to
the model; nothing here raises on any input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from activities.providers.base import ProviderCall
from activities.providers.errors import RAW_ARGUMENTS_KEY, parse_tool_arguments

# More calls than this in one reply is a model looping, not a plan; the rest stay text.
MAX_TEXT_CALLS = 16
# A name longer than any tool's is kept cut short: it only feeds an UnknownTool error.
_MAX_NAME_CHARS = 200
# Where a Hermes tag holds no parseable object, the name is still worth recovering so the
# model hears which call was malformed.
_NAME_IN_BROKEN_JSON = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')
_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\Z", re.DOTALL)
# Tags a small model puts around (or beside) a call written as text: Qwen's template lists the
# tools inside <tools>, and Qwen2.5-Coder 1.5B echoes its calls in them, or writes an empty
# pair before a fenced call. They are dropped before a whole reply is judged, as is a stray
# closing fence; what remains still counts only if it is calls of offered tools.
_WRAPPER_TAG = re.compile(r"</?(?:tools|tool_calls|function_call)>")


# The tool result as the chat template showed it to the model. A model never writes one for
# a reason; Qwen2.5-Coder 1.5B echoed a whole one as its "final answer" (real-model tier).
_ECHOED_RESULT = re.compile(r"<tool_response>.*?(?:</tool_response>|\Z)", re.DOTALL)


def without_echoed_results(text: str) -> str:
    """``text`` without ``<tool_response>`` blocks a model copied from its prompt; a reply
    that was only that becomes empty, which the loop treats as no answer (one nudge)."""
    if "<tool_response>" not in text:
        return text
    return _ECHOED_RESULT.sub("", text).strip()


@dataclass(frozen=True)
class TextToolCalls:
    """The calls found in a reply's text and the text that is left once they are removed."""

    calls: list[ProviderCall]
    text: str


def parse_text_tool_calls(text: str, offered: Collection[str]) -> TextToolCalls | None:
    """The tool calls written in ``text``, or None when it holds none.

    ``<tool_call>`` tags always count. A bare or fenced JSON call counts only when it is the
    whole reply and names a tool in ``offered``: an answer that merely contains JSON (or
    shows a call as an example) stays an answer.
    """
    if "<tool_call>" in text:
        return _tagged(text)
    calls = _whole_reply_calls(text.strip(), offered)
    return TextToolCalls(calls, "") if calls else None


def _tagged(text: str) -> TextToolCalls:
    calls: list[ProviderCall] = []
    kept: list[str] = []
    position = 0
    for match in _TAG.finditer(text):
        if len(calls) == MAX_TEXT_CALLS:
            break
        kept.append(text[position : match.start()])
        position = match.end()
        calls.append(_tag_call(_unfence(match.group(1).strip())))
    kept.append(text[position:])
    return TextToolCalls(calls, "".join(kept).strip())


def _tag_call(body: str) -> ProviderCall:
    value = _loads(body)
    call = _call_of(value) if isinstance(value, dict) else None
    if call is not None:
        return call
    found = _NAME_IN_BROKEN_JSON.search(body[:10_000])
    return ProviderCall(
        id="", name=found.group(1) if found else "", arguments={RAW_ARGUMENTS_KEY: body}
    )


def _whole_reply_calls(text: str, offered: Collection[str]) -> list[ProviderCall]:
    if not text:
        return []
    body = _WRAPPER_TAG.sub("", text).strip()
    if body.endswith("```") and not body.startswith("```"):
        body = body[:-3].rstrip()
    body = _unfence(body)
    values = _json_values(body)
    if not values and body.startswith("{{"):
        # Seen from Qwen2.5-Coder 1.5B: calls written with template-escaped braces,
        # `{{"name": "list_dir", "arguments": {"path": "."}}}}`, one or several.
        values = _json_values(body.replace("{{", "{").replace("}}", "}"))
    objects = values[0] if len(values) == 1 and isinstance(values[0], list) else values
    if not objects or len(objects) > MAX_TEXT_CALLS:
        return []
    calls = []
    for obj in objects:
        call = _call_of(obj) if isinstance(obj, dict) else None
        if call is None or call.name not in offered:
            return []
        calls.append(call)
    return calls


def _json_values(text: str) -> list[object]:
    """The JSON values that make up all of ``text``, side by side (a model writing several
    calls puts one per line); [] if anything else is there."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    position = 0
    while position < len(text) and len(values) <= MAX_TEXT_CALLS:
        if text[position] not in "{[":
            return []
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            return []
        values.append(value)
        position = len(text) - len(text[end:].lstrip())
    return values


def _call_of(obj: dict[str, Any]) -> ProviderCall | None:
    """A call from ``{"name": ..., "arguments"|"parameters": ...}``; None if not that shape."""
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    if not set(obj) <= {"name", "arguments", "parameters", "id", "type"}:
        return None
    raw = obj.get("arguments", obj.get("parameters"))
    return ProviderCall(id="", name=name[:_MAX_NAME_CHARS], arguments=parse_tool_arguments(raw))


def _unfence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _loads(text: str) -> object:
    if not text.startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
