"""Tool calls as one constrained JSON reply, for servers that cannot constrain native calls.

llama.cpp's server (``--jinja``) holds a tool call to its schema only once the model opens
its call tag (``<tool_call>`` for Qwen), which small models seldom write, and it refuses a
grammar of our own beside ``tools``. In grammar mode no ``tools`` are sent: the offered
tools are described in the system prompt, and the reply is held to one JSON schema that
allows exactly one of

    {"tool": "<an offered tool>", "arguments": {<that tool's arguments>}}
    {"answer": "<the final answer>"}

Until the conversation holds a tool result, the answer is left out of the schema: the first
reply calls a tool (openai_grammar.py). The reply is read back into a ProviderCall or text,
so nothing after the provider changes.

Tool definitions are untrusted (MCP servers write them): the prompt and the schema are
bounded (tools, characters, schema nodes: see grammar_schema), and a tool that does not fit
is left out of the request with the reason (``GrammarTools.left_out``), never an error.

Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from durable_agents.activities.providers.base import ProviderCall, TextSink, ToolSpec
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.grammar_schema import Inexpressible, constrainable

# native: tools go in the request's `tools` field; grammar: in the prompt, the reply held to
# REPLY_SCHEMA's shape; auto: grammar on llama.cpp's server, native everywhere else.
ToolMode = Literal["native", "grammar", "auto"]
TOOL_MODES: tuple[ToolMode, ...] = ("native", "grammar", "auto")

MAX_TOOLS = 64
MAX_DESCRIPTION_CHARS = 1_000
# The tools' lines in the system prompt, together (about 4,000 tokens).
MAX_PROMPT_CHARS = 16_000
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
_FENCED = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.DOTALL)

_INSTRUCTIONS = (
    "## Tools\n\n"
    "You can call these tools (one per line: its name, what it does, and its arguments as "
    "JSON Schema):\n{lines}\n\n"
    "Each reply of yours is exactly one JSON object:\n"
    '- to call a tool: {{"tool": "<tool name>", "arguments": {{<its arguments>}}}}\n'
    '- to give the final answer once the task is done: {{"answer": "<your answer>"}}\n'
    "Call one tool per reply; its result comes back in the next message."
)


@dataclass(frozen=True)
class LeftOut:
    """A tool the request does not offer in grammar mode, and why (our words)."""

    name: str
    reason: str


@dataclass(frozen=True)
class GrammarTools:
    """What a request in grammar mode carries for its tools."""

    prompt: str  # appended to the system prompt; "" when no tool is offered
    schema: dict[str, Any] | None  # the reply's schema; None when no tool is offered
    offered: tuple[str, ...]
    left_out: tuple[LeftOut, ...]
    # The schema without the answer: a reply held to it calls one of the tools.
    call_schema: dict[str, Any] | None = None


def grammar_tools(tools: Sequence[ToolSpec]) -> GrammarTools:
    """The prompt text and reply schema offering ``tools``, each one that fits."""
    lines: list[str] = []
    alternatives: list[dict[str, Any]] = []
    offered: list[str] = []
    left_out: list[LeftOut] = []
    used = 0
    for tool in tools:
        try:
            line, arguments = _tool_line(tool, seen=offered)
        except Inexpressible as why:
            left_out.append(LeftOut(tool.name[:128], str(why)))
            continue
        if len(offered) >= MAX_TOOLS:
            left_out.append(LeftOut(tool.name, f"more than {MAX_TOOLS} tools are offered"))
            continue
        if used + len(line) > MAX_PROMPT_CHARS:
            left_out.append(LeftOut(tool.name, "the tools' descriptions fill the prompt's share"))
            continue
        used += len(line) + 1
        lines.append(line)
        offered.append(tool.name)
        alternatives.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool.name}, "arguments": arguments},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    if not offered:
        return GrammarTools("", None, (), tuple(left_out))
    answer = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    return GrammarTools(
        _INSTRUCTIONS.format(lines="\n".join(lines)),
        {"anyOf": [*alternatives, answer]},
        tuple(offered),
        tuple(left_out),
        {"anyOf": alternatives},
    )


def _tool_line(tool: ToolSpec, seen: Sequence[str]) -> tuple[str, dict[str, Any]]:
    if not isinstance(tool.name, str) or not _TOOL_NAME.fullmatch(tool.name):
        raise Inexpressible("its name is not 1-128 letters, digits, '_', '.' or '-'")
    if tool.name in seen:
        raise Inexpressible("another tool has its name")
    arguments = constrainable(tool.parameters)
    try:
        shown = constrainable(tool.parameters, descriptions=True)
    except Inexpressible:  # its descriptions make it too large: shown without them
        shown = arguments
    description = tool.description if isinstance(tool.description, str) else ""
    line = json.dumps(
        {
            "name": tool.name,
            "description": description[:MAX_DESCRIPTION_CHARS],
            "parameters": shown,
        },
        ensure_ascii=False,
    )
    return line, arguments


# The conversation as the model sees it in grammar mode ----------------------------------


def call_json(call: ProviderCall) -> str:
    """An earlier call, as the model would have written it in grammar mode."""
    return json.dumps({"tool": call.name, "arguments": call.arguments}, ensure_ascii=False)


def answer_json(text: str) -> str:
    """An earlier answer, as the model would have written it in grammar mode."""
    return json.dumps({"answer": text}, ensure_ascii=False)


def result_text(tool: str | None, content: str) -> str:
    """A tool result, shown to the model as a user message (no ``tools`` in the request,
    so no server need accept a ``tool`` message)."""
    return f"Result of {tool or 'the tool call'}:\n{content}"


# Reading the reply -----------------------------------------------------------------------


@dataclass(frozen=True)
class ConstrainedReply:
    text: str
    calls: list[ProviderCall]


_CUT_CALL = re.compile(
    r'\A\s*(?:```(?:json)?\s*)?\{\s*"tool"\s*:\s*"([^"\\]{1,128})"'
    r'\s*,\s*"arguments"\s*:\s*(.*)\Z',
    re.S,
)
_ANSWER_START = re.compile(r'\A\s*(?:```(?:json)?\s*)?\{\s*"answer"\s*:\s*"', re.S)


def read_constrained(text: str, *, cut: bool = False) -> ConstrainedReply | None:
    """The call or answer a reply in grammar mode holds; None when it holds neither (a
    server that did not apply the schema), for the caller to read it as plain text.

    ``cut``: the reply ran out of tokens. A call cut short keeps its name and its raw
    arguments (the tool layer reports them malformed, so the model hears of it); an
    answer cut short is the part written."""
    body = text.strip()
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        value = json.loads(body, strict=False)
    except ValueError:
        return _read_cut(text) if cut else None
    if not isinstance(value, dict):
        return None
    name = value.get("tool")
    if isinstance(name, str):
        arguments = value.get("arguments")
        if not isinstance(arguments, dict):
            arguments = {RAW_ARGUMENTS_KEY: json.dumps(arguments, ensure_ascii=False)}
        return ConstrainedReply("", [ProviderCall(id="", name=name, arguments=arguments)])
    answer = value.get("answer")
    if isinstance(answer, str):
        return ConstrainedReply(answer, [])
    return None


def _read_cut(text: str) -> ConstrainedReply | None:
    call = _CUT_CALL.match(text)
    if call:
        raw = {RAW_ARGUMENTS_KEY: call.group(2)}
        return ConstrainedReply("", [ProviderCall(id="", name=call.group(1), arguments=raw)])
    start = _ANSWER_START.match(text)
    if start:
        return ConstrainedReply(_decoded_prefix(text[start.end() :])[0], [])
    return None


def _decoded_prefix(encoded: str) -> tuple[str, int, bool]:
    """The JSON string body ``encoded`` decodes to as far as it is whole: (the text, how
    many characters of ``encoded`` it used, whether the closing quote was reached)."""
    end = 0
    i = 0
    closed = False
    while i < len(encoded):
        c = encoded[i]
        if c == '"':
            closed = True
            break
        if c != "\\":
            i += 1
            end = i
            continue
        if i + 1 >= len(encoded):
            break
        if encoded[i + 1] != "u":
            i += 2
            end = i
            continue
        if i + 6 > len(encoded):
            break
        high = encoded[i + 2 : i + 6].lower()
        if "d800" <= high <= "dbff":  # half of a pair: only with the other half
            if i + 12 > len(encoded):
                break
            i += 12
        else:
            i += 6
        end = i
    try:
        decoded = json.loads(f'"{encoded[:end]}"', strict=False)
    except ValueError:
        return "", end, closed
    return (decoded if isinstance(decoded, str) else ""), end, closed


class AnswerPreview:
    """Hears a grammar-mode reply's text as it streams and passes on only the answer's
    own words, decoded: a viewer sees the answer being written, never the JSON around it,
    and nothing of a tool call (as with native calls)."""

    _OPENINGS = ('{"answer":"', '```json{"answer":"', '```{"answer":"')

    def __init__(self, sink: TextSink) -> None:
        self._sink = sink
        self._seen = ""
        self._state: Literal["opening", "answer", "quiet"] = "opening"
        self._used = 0  # characters of the answer's encoded body already passed on

    async def __call__(self, piece: str) -> None:
        if self._state == "quiet":
            return
        self._seen += piece
        if self._state == "opening":
            start = _ANSWER_START.match(self._seen)
            if start is None:
                compact = "".join(self._seen.split())
                if not any(o.startswith(compact) for o in self._OPENINGS):
                    self._state = "quiet"  # a tool call (or not JSON at all)
                return
            self._state = "answer"
            self._seen = self._seen[start.end() :]
        decoded, used, closed = _decoded_prefix(self._seen[self._used :])
        self._used += used
        if closed:
            self._state = "quiet"
        if decoded:
            await self._sink(decoded)
