"""Tool calls a model wrote as XML-like function tags instead of returning them natively.

Qwen2.5-Coder 1.5B, shown its tools inside ``<tools>`` by its chat template, often answers
in kind: ``<tools><function name="list_dir" arguments='{"path": "docs/"}'/></tools>``.
Llama-style models write ``<function=list_dir>{"path": "docs/"}</function>``; others
``<function name="list_dir">{"path": "docs/"}</function>``. Each such tag is a call, as a
``<tool_call>`` tag is, whatever name it gives (the tool layer answers an unknown one with
the real names).

Pure functions, no I/O. What a model wrote is untrusted: each tag is read with bounded
searches, at most ``MAX_TAGS`` of them (text_tool_calls.py keeps the distinct ones);
arguments that are not a JSON object are kept raw (``RAW_ARGUMENTS_KEY``) for the tool layer
to report back; nothing here raises on any input.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from durable_agents.activities.providers.base import ProviderCall
from durable_agents.activities.providers.errors import parse_tool_arguments

# Past this many tags the rest stays text: a small model repeating one call until its token
# limit writes a few hundred, hostile text may hold thousands.
MAX_TAGS = 256
# The opening of a tag: `<function name="x"` (either quote) or `<function=x`.
_OPEN = re.compile(
    r"""<function(?:\s+name\s*=\s*(["'])([^"'<>\n]{1,200})\1|=([A-Za-z_][\w.-]{0,127}))"""
)
_ARGUMENTS = re.compile(r"""\s+(?:arguments|parameters)\s*=\s*(["'])""")
# Where an attribute's value ends, by its quote: at the first such quote that closes the tag
# (JSON inside may hold the other quote, or this one not followed by `>`).
_VALUE_END = {quote: re.compile(quote + r"\s*(/?>)") for quote in ("'", '"')}
_SELF_CLOSED = re.compile(r"\s*/>")
_OPENED = re.compile(r"\s*>")
_CLOSE = "</function>"
_CLOSING_TAG = re.compile(r"\s*</function>")
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```\Z", re.DOTALL)


@dataclass(frozen=True)
class TaggedCalls:
    """The calls written as function tags, and the text left once they are taken out."""

    calls: list[ProviderCall]
    text: str


def function_tag_calls(text: str, *, cut: bool = False) -> TaggedCalls:
    """The function-tag calls in ``text``, in order; none when it holds no such tag.

    A tag that never ends is text, unless the reply was ``cut`` at its token limit: then it
    is a call the limit cut short, and it goes with whatever follows it."""
    if "<function" not in text:
        return TaggedCalls([], text)
    calls: list[ProviderCall] = []
    kept: list[str] = []
    position = 0
    while len(calls) < MAX_TAGS:
        opened = _OPEN.search(text, position)
        if opened is None:
            break
        read = _read_tag(text, opened)
        kept.append(text[position : opened.start()])
        if read is None:
            return TaggedCalls(calls, "".join(kept) + ("" if cut else text[opened.start() :]))
        call, position = read
        calls.append(call)
    kept.append(text[position:])
    return TaggedCalls(calls, "".join(kept))


def _read_tag(text: str, opened: re.Match[str]) -> tuple[ProviderCall, int] | None:
    """The call of the tag ``opened`` starts, and where the tag ends; None if it never does."""
    name = opened.group(2) or opened.group(3) or ""
    at = opened.end()
    attribute = _ARGUMENTS.match(text, at)
    raw: str | None = None
    if attribute is not None:
        quote = attribute.group(1)
        closing = _VALUE_END[quote].search(text, attribute.end())
        if closing is None:
            return None
        raw = text[attribute.end() : closing.start()]
        if quote == '"':
            raw = html.unescape(raw)
        at = closing.start() + 1
    closed = _SELF_CLOSED.match(text, at)
    if closed is not None:
        return _call(name, raw), closed.end()
    body_start = _OPENED.match(text, at)
    if body_start is None:
        return None
    if raw is not None:  # the arguments were the attribute: a closing tag is optional
        closing_tag = _CLOSING_TAG.match(text, body_start.end())
        return _call(name, raw), closing_tag.end() if closing_tag else body_start.end()
    end = text.find(_CLOSE, body_start.end())
    if end < 0:
        return None
    body = text[body_start.end() : end].strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    return _call(name, raw if raw is not None else body), end + len(_CLOSE)


def _call(name: str, raw: str | None) -> ProviderCall:
    return ProviderCall(id="", name=name, arguments=parse_tool_arguments(raw))
