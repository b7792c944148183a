"""Size limits on text that users and models put into a session.

Without them one 10 MB follow-up pushed the system prompt and the task out of the model's
context. A user's text over its limit is refused with a ValueError before anything is
committed; a model's tool call over its limit is kept as a small marker, and running it is a
tool error the model sees (the model's mistake must not fail the task). The limits are
settings (AGENT_MAX_*); these dataclass defaults are the settings' defaults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from durable_agents.vocabulary.tokens import utf8_size as utf8_size

KIB = 1024

# A model call's oversized arguments are replaced by {OVERSIZED_ARGUMENTS_KEY: {...}}, like
# unparseable ones are kept under "_raw": the tool layer turns either into an error result.
OVERSIZED_ARGUMENTS_KEY = "_oversized"
ARGUMENTS_TOO_LARGE = "ArgumentsTooLarge"


class TextTooLarge(ValueError):
    """A user's text over its configured limit; nothing was committed."""


@dataclass(frozen=True)
class TextLimits:
    max_task_bytes: int = 1024 * KIB
    max_message_bytes: int = 1024 * KIB
    max_edit_bytes: int = 256 * KIB
    # A model's whole reply is bounded by reply_tokens; this is the cap when a provider
    # (or a model on a large reply budget) sends more.
    max_tool_argument_bytes: int = 256 * KIB
    # A task or message over this is stored as an artifact with an inline preview, and
    # context assembly expands it like a tool result (an excerpt when it does not fit).
    inline_message_bytes: int = 32 * KIB


def json_size(value: Any) -> int:
    """Bytes of `value` as JSON text, as it is stored and sent."""
    return utf8_size(json.dumps(value, ensure_ascii=False, default=str))


def check_size(what: str, size: int, limit: int, setting: str) -> None:
    """Raise TextTooLarge naming the limit and its setting if `size` is over it."""
    if size > limit:
        raise TextTooLarge(f"{what}: {size} bytes is over the limit of {limit} bytes ({setting})")


def bounded_arguments(arguments: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """`arguments`, or a marker saying how large they were when they exceed `max_bytes`."""
    size = json_size(arguments)
    if size <= max_bytes:
        return arguments
    return {OVERSIZED_ARGUMENTS_KEY: {"bytes": size, "limit": max_bytes}}


def oversized_arguments(arguments: dict[str, Any], max_bytes: int) -> str | None:
    """Why arguments about to run are too large (a marker, or over `max_bytes`), else None."""
    marker = arguments.get(OVERSIZED_ARGUMENTS_KEY)
    if isinstance(marker, dict):
        size = marker.get("bytes", "?")
    else:
        size = json_size(arguments)
        if size <= max_bytes:
            return None
    return (
        f"the tool arguments were {size} bytes, over the limit of {max_bytes} bytes "
        "(AGENT_MAX_TOOL_ARGUMENT_BYTES); send smaller arguments"
    )


class InvalidText(ValueError):
    """A user's text that AgentState cannot hold as text; nothing was committed. The
    message names the field and the position, never the text."""


def check_text(field: str, text: str) -> str:
    """`text` if it is storable as text: no NUL (PostgreSQL's text type refuses it) and no
    lone surrogate (not encodable as UTF-8). The one rule for every entrance's user text."""
    if not isinstance(text, str):
        raise InvalidText(f"{field} must be a string, got {type(text).__name__}")
    nul = text.find("\x00")
    if nul >= 0:
        raise InvalidText(f"{field} contains a NUL character (U+0000) at offset {nul}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidText(
            f"{field} contains a lone surrogate at offset {err.start}; send valid Unicode"
        ) from None
    return text


def check_json_text(field: str, value: Any) -> Any:
    """`value` (decoded JSON) if every key and string in it passes check_text."""
    stack: list[tuple[str, Any]] = [(field, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            check_text(where, node)
        elif isinstance(node, dict):
            for key, child in node.items():
                check_text(f"{where} (a key)", str(key))
                stack.append((f"{where}.{str(key)[:40]}", child))
        elif isinstance(node, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(node))
    return value


def storable_text(text: str) -> str:
    """`text` made storable as text for a preview or a model-facing excerpt: NUL and lone
    surrogates become U+FFFD. The bytes themselves stay as they were, in the artifact."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text
