"""Checking a tool's JSON arguments: each mistake is an InvalidArguments ToolError."""

from __future__ import annotations

from typing import Any

from activities.providers.errors import RAW_ARGUMENTS_KEY
from activities.tools.base import ToolError

# What an error message shows of names the model chose, and how many of them.
_MAX_SHOWN_NAME = 60
_MAX_SHOWN_NAMES = 10


def check_args(args: dict[str, Any]) -> None:
    if RAW_ARGUMENTS_KEY in args:
        raise ToolError(
            "InvalidArguments", "the tool arguments were not valid JSON; send a JSON object"
        )


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
