"""Checking a tool's JSON arguments: each mistake is an InvalidArguments ToolError."""

from __future__ import annotations

import json
from typing import Any

from activities.tools.base import ToolError, ToolOutput

_JSON = "application/json"


def check_args(args: dict[str, Any]) -> None:
    if "_raw" in args:
        raise ToolError(
            "InvalidArguments", "the tool arguments were not valid JSON; send a JSON object"
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
