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


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


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
