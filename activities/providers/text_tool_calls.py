"""Tool calls a model wrote as text instead of returning them natively.

Small local models served without a tool-call parser (or with one that does not know their
format) answer a tool call as text: Hermes/Qwen ``<tool_call>{...}</tool_call>`` tags, the
same in ``<tool_response>`` tags, or a bare ``{"name": ..., "arguments": ...}`` object, often
inside a ```json fence, alone or inside prose. Taken as the final answer, that text would end
the task with a tool call as its result. What is no answer either (empty markup, example calls,
bare arguments) is judged from the text this leaves (non_answers.py).

Pure functions, no I/O. What a model wrote is untrusted: anything malformed becomes a call
whose arguments are kept raw (``RAW_ARGUMENTS_KEY``), which the tool layer reports back to
the model; nothing here raises on any input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass

from durable_agents.activities.providers.base import ProviderCall
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.function_tags import function_tag_calls
from durable_agents.activities.providers.prose_calls import (
    call_of,
    guessed_call,
    holds_placeholder,
    json_objects,
)

# More calls than this in one reply is a model looping, not a plan; the rest stay text.
MAX_TEXT_CALLS = 16
# Where a Hermes tag holds no parseable object, the name is still worth recovering so the
# model hears which call was malformed.
_NAME_IN_BROKEN_JSON = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\Z", re.DOTALL)
# A fence left with nothing in it once the call it held is taken out.
_EMPTY_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*```")
# Tags a small model puts around (or beside) a call written as text: Qwen's template lists the
# tools inside <tools>, and Qwen2.5-Coder 1.5B echoes its calls in them, or writes an empty
# pair before a fenced call. They are dropped before a whole reply is judged, as is a stray
# closing fence; what remains still counts only if it is calls (see `_whole_reply_calls`).
_WRAPPER_TAG = re.compile(r"</?(?:tools|tool_calls|function_call)>")


# A reply's text as the loop takes it ------------------------------------------------------

# Qwen's chat template shows each tool result as <tool_response>...</tool_response>. Models of
# that family copy such a block from the prompt (an echo), but also put their own calls in one
# (the 1.5B wrote its survey's write_file call so, twice): only a block repeating an earlier
# result is an echo; a block holding a call is that call; anything else in one is text.
_BLOCK = re.compile(
    r"<(tool_call|tool_response)>(.*?)(?:</(?:tool_call|tool_response)>|\Z)", re.DOTALL
)
_BLOCK_TAG = re.compile(r"</?(?:tool_call|tool_response)>")
# Markup with nothing in it is not an answer: tags (`<tools></tools>`), fences, chat-template
# tokens (`<|im_end|>`). A reply of only these is empty, which the loop nudges.
_MARKUP = re.compile(r"</?[A-Za-z_][A-Za-z0-9_:-]*\s*/?>|<\|[A-Za-z0-9_]+\|>|```[A-Za-z0-9_-]*")
_SPACE = re.compile(r"\s+")
# A reply is bounded by its output budget; past this many blocks the rest stays text, so a
# hostile one cannot make the echo check compare every block with every result.
_MAX_BLOCKS = 64


@dataclass(frozen=True)
class TextToolCalls:
    """The calls found in a reply's text and the text that is left once they are removed."""

    calls: list[ProviderCall]
    text: str


def read_reply_text(
    text: str,
    offered: Collection[str],
    results: Collection[str] = (),
    *,
    cut: bool = False,
) -> TextToolCalls:
    """The calls written in a reply's ``text`` and the answer left once they, echoes of
    ``results`` (the tool results the model was shown) and bare markup are removed.

    A call in a ``<tool_call>`` tag or a function tag (function_tags.py) always counts, and
    so does one that is all of a
    ``<tool_response>`` block that does not repeat one of ``results``. A bare or fenced JSON
    call that is the whole reply counts when it is of a tool in ``offered`` (``arguments``
    may be left out), or of any tool name when it carries arguments and some tools were
    offered, so that a guessed name is answered with the real ones (an UnknownTool result).
    A call written inside prose counts when it is of a tool in ``offered``: small models
    explain what they do and write the call in the middle (the prose is kept as its text);
    of several, the first runs.

    Arguments that stand for values (``<path>``, ``...``, ``your_file.txt``) make a bare or
    prose call an example, not a call: none of the reply's calls run (non_answers.py says
    what it is). The same call written twice in one reply runs once.

    A reply ``cut`` at its token limit may end inside a call: a small model that writes the
    same call over and over runs into the limit so. Its complete leading calls count; the
    unfinished tail is dropped, not taken as an answer.
    """
    tagged = function_tag_calls(text, cut=cut)
    if not tagged.calls:
        return _read(text, offered, results, cut=cut)
    rest = _read(tagged.text, offered, results, cut=cut)
    return TextToolCalls(_distinct(tagged.calls + rest.calls)[:MAX_TEXT_CALLS], rest.text)


def _read(
    text: str, offered: Collection[str], results: Collection[str], *, cut: bool
) -> TextToolCalls:
    left = text
    if "<tool_call>" in text or "<tool_response>" in text:
        found = _blocks(text, offered, results)
        left = found.text
        if found.calls:
            return TextToolCalls(_distinct(found.calls), "" if is_bare_markup(left) else left)
    calls = _whole_reply_calls(left.strip(), offered)
    if not calls and cut:
        calls = _whole_reply_calls(_complete_values(left.strip()), offered)
    if calls and not any(holds_placeholder(c.arguments) for c in calls):
        return TextToolCalls(_distinct(calls), "")
    if not calls and (in_prose := _prose_calls(left, offered)) is not None:
        return in_prose
    return TextToolCalls([], "" if is_bare_markup(left) else left.strip())


def _prose_calls(text: str, offered: Collection[str]) -> TextToolCalls | None:
    """The calls of offered tools written inside prose, and the prose without them; None
    when there are none, or when any call-shaped object in it holds a placeholder."""
    shaped = [(f, call) for f in json_objects(text) if (call := call_of(f.value)) is not None]
    if any(holds_placeholder(call.arguments) for _, call in shaped):
        return None
    ours = [(f, call) for f, call in shaped if call.name in offered][:MAX_TEXT_CALLS]
    if not ours:
        return None
    kept, position = [], 0
    for f, _ in ours:
        start, end = f.start, f.end
        # The braces of a call written with template-escaped ones ({{"name": ...}}) go too.
        while start > position and text[start - 1] == "{" and text[end : end + 1] == "}":
            start, end = start - 1, end + 1
        end += len(text[end : end + 2]) - len(text[end : end + 2].lstrip("}"))
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    prose = _EMPTY_FENCE.sub("", "".join(kept)).strip()
    # Calls written among sentences are a plan's steps, each written before the result of
    # the one before it was seen (Qwen2.5-Coder 1.5B: a read, an edit, then a write of made-up
    # lines): the first runs, and the model writes the next with its result in view.
    return TextToolCalls([ours[0][1]], prose)


def _complete_values(text: str) -> str:
    """The leading JSON values of ``text`` that are complete (a fence opened before them
    allowed), without whatever unfinished one follows; "" if there are none."""
    body = _WRAPPER_TAG.sub("", text).strip()
    fence = re.match(r"```[A-Za-z0-9_-]*[ \t]*\n", body)
    if fence:
        body = body[fence.end() :]
    decoder = json.JSONDecoder()
    position, end, count = 0, 0, 0
    while position < len(body) and body[position] in "{[" and count < MAX_TEXT_CALLS:
        count += 1
        try:
            _, end = decoder.raw_decode(body, position)
        except (ValueError, RecursionError):
            break
        position = len(body) - len(body[end:].lstrip())
        if body.startswith("```", position):
            break
    return body[:end]


def _distinct(calls: list[ProviderCall]) -> list[ProviderCall]:
    seen: set[str] = set()
    kept = []
    for call in calls:
        key = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            kept.append(call)
    return kept


def parse_text_tool_calls(
    text: str, offered: Collection[str], results: Collection[str] = ()
) -> TextToolCalls | None:
    """The tool calls written in ``text`` (see ``read_reply_text``), or None when it holds
    none."""
    found = read_reply_text(text, offered, results)
    return found if found.calls else None


def is_bare_markup(text: str) -> bool:
    """True when ``text`` holds nothing but tags, fences and whitespace."""
    return not _MARKUP.sub("", text).strip()


def _is_echo(body: str, shown: list[str]) -> bool:
    """``body`` repeats (all or part of) an earlier result verbatim, spacing aside."""
    said = _SPACE.sub(" ", body).strip()
    return not said or any(said in r for r in shown)


def _blocks(text: str, offered: Collection[str], results: Collection[str]) -> TextToolCalls:
    calls: list[ProviderCall] = []
    kept: list[str] = []
    position = 0
    shown = [_SPACE.sub(" ", r) for r in results] if "<tool_response>" in text else []
    for n, match in enumerate(_BLOCK.finditer(text)):
        if len(calls) >= MAX_TEXT_CALLS or n == _MAX_BLOCKS:
            break
        kept.append(text[position : match.start()])
        position = match.end()
        # A block closed with the other tag, or one inside the other, is the same block.
        body = _unfence(_BLOCK_TAG.sub("", match.group(2)).strip())
        if match.group(1) == "tool_call":
            calls.append(_tag_call(body))
        elif _is_echo(body, shown):
            continue
        elif found := _whole_reply_calls(body, offered):
            calls.extend(found[: MAX_TEXT_CALLS - len(calls)])
        elif body.startswith("{") and _NAME_IN_BROKEN_JSON.search(body[:10_000]):
            calls.append(_tag_call(body))  # a cut-off call: the model hears it was malformed
        else:
            kept.append(body)
    kept.append(text[position:])
    return TextToolCalls(calls, "".join(kept).strip())


def _tag_call(body: str) -> ProviderCall:
    value = _loads(body)
    call = call_of(value) if isinstance(value, dict) else None
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
        if not isinstance(obj, dict):
            return []
        call = call_of(obj)
        # With no tools offered (a summary request) nothing is a call the model could mean.
        if call is None or not (call.name in offered or (offered and guessed_call(obj))):
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
