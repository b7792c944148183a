"""JSON objects written inside a reply's prose, and what marks one as an example rather than
a call: the pieces text_tool_calls.py and non_answers.py read a reply with.

Pure functions, no I/O; what a model wrote is untrusted, so the scans are bounded and
nothing here raises on any input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from durable_agents.activities.providers.base import ProviderCall
from durable_agents.activities.providers.errors import parse_tool_arguments

# A name longer than any tool's is kept cut short: it only feeds an UnknownTool error.
_MAX_NAME_CHARS = 200
# A name a tool could have: a JSON object naming anything else is data, not a call.
TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
# Where a JSON object with a key, or an array of values, may begin (an object inside an
# array is data in it, not one of its own). Each candidate costs one decode, which may run to
# the end of the text: past this many, the rest of a reply is not looked at.
_VALUE_START = re.compile(r'\{\s*"|\[\s*[\[{"]')
_MAX_ATTEMPTS = 32
# A placeholder is an argument value that stands for one: all of it one of these.
_PLACEHOLDER = re.compile(
    r"\.{3,}|…"  # ...
    r"|<[A-Za-z_][\w .\-/]{0,60}>"  # <path>, <file name>
    r"|\{\{?[A-Za-z_][\w .\-]{0,60}\}?\}"  # {path}, {{path}}
    r"|\[[A-Za-z_][\w .\-]{0,60}\]"  # [PATH]
    r"|\$\{?[A-Za-z_]\w{0,60}\}?"  # $PATH, ${PATH}
)
# Or a short value naming what the reader should put there: your_file.txt, path/to/file,
# "your content here". Long values (file contents) are not judged by their words.
_PLACEHOLDER_WORDS = re.compile(
    r"(?:^|[\s/\\])(?:path/to/|your[_-]\w|your(?:file|dir|folder|path|content|text|code|data)"
    r"|your (?:file|path|content|directory|folder|text|code|data|message|answer)\b)",
    re.IGNORECASE,
)
_SHORT_VALUE = 120
# Prose that presents what follows as an example of a call rather than the call itself.
EXAMPLE_FRAMING = re.compile(
    r"\b(?:you (?:can|could|would|should|may) use|you can call|you (?:would|will) need to"
    r"|for example|for instance|e\.g\.|example:|an example|as follows)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Found:
    """A JSON object written in a text, and where: ``text[start:end]``."""

    value: dict[str, Any]
    start: int
    end: int


def json_objects(text: str) -> list[Found]:
    """The JSON objects written in ``text`` (alone, fenced or inside prose), outermost
    only and not inside an array, in order."""
    decoder = json.JSONDecoder()
    found: list[Found] = []
    position = 0
    for _ in range(_MAX_ATTEMPTS):
        match = _VALUE_START.search(text, position)
        if match is None:
            break
        try:
            value, end = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            position = match.start() + 1
            continue
        if isinstance(value, dict):
            found.append(Found(value, match.start(), end))
        position = end
    return found


def call_of(obj: dict[str, Any]) -> ProviderCall | None:
    """A call from ``{"name": ..., "arguments"|"parameters": ...}``; None if not that shape."""
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    if not set(obj) <= {"name", "arguments", "parameters", "id", "type"}:
        return None
    raw = obj.get("arguments", obj.get("parameters"))
    return ProviderCall(id="", name=name[:_MAX_NAME_CHARS], arguments=parse_tool_arguments(raw))


def guessed_call(obj: dict[str, Any]) -> bool:
    """A call of a tool that may not be offered, as a small model guesses one (`read_files`):
    a name a tool could have, with arguments."""
    name = obj.get("name")
    has_arguments = "arguments" in obj or "parameters" in obj
    return has_arguments and isinstance(name, str) and TOOL_NAME.fullmatch(name) is not None


def holds_placeholder(value: object, depth: int = 0) -> bool:
    """Some string in ``value`` (arguments, nested) stands for a value instead of being one:
    ``<path>``, ``...``, ``{path}``, ``your_file.txt``, ``path/to/file``."""
    if depth > 8:
        return False
    if isinstance(value, str):
        said = value.strip()
        if _PLACEHOLDER.fullmatch(said):
            return True
        return len(said) <= _SHORT_VALUE and _PLACEHOLDER_WORDS.search(said) is not None
    if isinstance(value, Mapping):
        return any(holds_placeholder(v, depth + 1) for v in list(value.values())[:64])
    if isinstance(value, list):
        return any(holds_placeholder(v, depth + 1) for v in value[:64])
    return False


def fits_schema(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    """``arguments`` name every argument the schema requires and nothing it does not
    declare (a schema that declares nothing fits nothing: it has not said what it takes)."""
    properties = schema.get("properties")
    required = schema.get("required") or []
    if not isinstance(properties, Mapping) or not properties or not isinstance(required, list):
        return False
    keys = set(arguments)
    return bool(keys) and set(required) <= keys <= set(properties)
