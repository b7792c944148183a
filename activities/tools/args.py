"""Checking a tool's JSON arguments: each mistake is an InvalidArguments ToolError."""

from __future__ import annotations

import json
from typing import Any

from activities.providers.errors import RAW_ARGUMENTS_KEY
from activities.tools.base import ToolError, ToolOutput

_JSON = "application/json"
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


def require_str(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if value is None:
        raise ToolError("InvalidArguments", f"missing required argument {name!r} (string)")
    if not isinstance(value, str):
        raise ToolError(
            "InvalidArguments", f"argument {name!r} must be a string, got {type(value).__name__}"
        )
    return value


def optional_str(args: dict[str, Any], name: str, default: str) -> str:
    return default if args.get(name) is None else require_str(args, name)


def optional_bool(args: dict[str, Any], name: str, default: bool) -> bool:
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(
            "InvalidArguments", f"argument {name!r} must be a boolean, got {type(value).__name__}"
        )
    return value


def optional_positive_int(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    # bool is an int subclass; "max_bytes": true is a model mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ToolError("InvalidArguments", f"argument {name!r} must be a positive integer")
    return value


def json_output(payload: dict[str, Any], summary: str) -> ToolOutput:
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return ToolOutput(content=body, content_type=_JSON, summary=summary)
