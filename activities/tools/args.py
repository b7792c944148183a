"""Checking a tool's JSON arguments: each mistake is an InvalidArguments ToolError."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from durable_agents.activities.providers.errors import CUT_ARGUMENTS_KEY, RAW_ARGUMENTS_KEY
from durable_agents.activities.tools.base import ToolError

# What an error message shows of names the model chose, and how many of them.
_MAX_SHOWN_NAME = 60
_MAX_SHOWN_NAMES = 10
# How much of a call's unparseable arguments its error shows back to the model.
_MAX_SHOWN_SENT = 300
# A line break in arguments that are not JSON: written, or escaped inside a string.
_LINE_BREAK = re.compile(r"\\+n|\n")


def check_args(args: dict[str, Any], tool_name: str, schema: dict[str, Any]) -> None:
    """Refuse a call whose arguments were not a JSON object, saying what to send instead: a
    small model that cut its JSON short or wrote ``path=x`` needs the shape, not just "no"."""
    if RAW_ARGUMENTS_KEY in args and args.get(CUT_ARGUMENTS_KEY):
        # Not shown back: a small model copies what it is shown, and a runaway reply's text
        # is what it should not write again.
        sent = str(args[RAW_ARGUMENTS_KEY])
        raise ToolError(
            "InvalidArguments",
            f"{tool_name} did not run: the reply reached its output limit before the call's "
            f"arguments ended, {len(sent)} characters in"
            + ("; it wrote the same lines again and again" if _repeats(sent) else "")
            + f". Call {tool_name} again now with shorter arguments, each line once, as one "
            f"complete JSON object: {argument_shape(schema)}",
        )
    if RAW_ARGUMENTS_KEY in args:
        # Worded for the model, which may read a tool result as a user's message (Qwen's
        # template puts it in a user turn) and explain the error instead of acting on it:
        # what it sent, that it is its own call to make again, and the shape to send.
        sent = str(args[RAW_ARGUMENTS_KEY])
        sent = sent if len(sent) <= _MAX_SHOWN_SENT else sent[:_MAX_SHOWN_SENT] + "..."
        raise ToolError(
            "InvalidArguments",
            f"{tool_name} did not run: its arguments were not valid JSON. You sent: {sent}\n"
            f"Call {tool_name} again now, with its arguments as one complete JSON object: "
            f"{argument_shape(schema)}",
        )


def _repeats(sent: str) -> bool:
    """Whether some line of `sent` (split at newlines, escaped or not) comes 3 times or more."""
    lines = [line.strip() for line in _LINE_BREAK.split(sent) if len(line.strip()) >= 10]
    return bool(lines) and Counter(lines).most_common(1)[0][1] >= 3


def argument_shape(schema: dict[str, Any]) -> str:
    """A tool's arguments in a line: ``{"path": string (required), "max_bytes": integer}``."""
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict) or not properties:
        return "{}"
    required = set(schema.get("required") or ())
    shown = []
    for name, spec in list(properties.items())[:_MAX_SHOWN_NAMES]:
        kind = spec.get("type", "value") if isinstance(spec, dict) else "value"
        kind = kind if isinstance(kind, str) else "/".join(str(k) for k in kind)
        shown.append(f'"{name}": {kind}' + (" (required)" if name in required else ""))
    return "{" + ", ".join(shown) + "}"


def check_allowed(args: dict[str, Any], schema: dict[str, Any]) -> None:
    """Refuse arguments the tool's JSON schema does not allow, naming them, instead of the
    tool silently ignoring them (a misspelt optional argument would otherwise do nothing).

    Declared properties are closed unless the schema sets additionalProperties: an agent's
    tools declare everything they read, so an unknown name is a model mistake. A schema that
    declares no properties at all (``{"type": "object"}``) has not said what it takes.
    """
    if RAW_ARGUMENTS_KEY in args or "properties" not in schema:
        return  # raw arguments are check_args' to report
    if schema.get("additionalProperties") not in (None, False):
        return  # an open schema allows extras
    allowed = schema["properties"] or {}
    unknown = sorted(name for name in args if name not in allowed)
    if not unknown:
        return
    shown = ", ".join(repr(n[:_MAX_SHOWN_NAME]) for n in unknown[:_MAX_SHOWN_NAMES])
    more = f" and {len(unknown) - _MAX_SHOWN_NAMES} more" if len(unknown) > _MAX_SHOWN_NAMES else ""
    known = ", ".join(repr(n) for n in sorted(allowed)) or "none"
    raise ToolError(
        "InvalidArguments",
        f"unknown argument{'s' if len(unknown) > 1 else ''} {shown}{more}; "
        f"this tool takes: {known}",
    )
