"""A typed function's arguments as a pydantic model: the JSON schema the model sees, and
the validation its arguments pass before the function runs.

Each parameter becomes a field under a private name with the parameter's name as its alias,
so a parameter may be called `json`, `copy` or `model_x` without shadowing pydantic's own
attributes. Validation is pydantic's strict JSON mode, because the arguments are JSON: a
string is not an integer, `true` is not 1, but a UUID or a date may come as a string.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import ErrorDetails

from durable_agents.activities.tools.base import ToolContext, ToolError

# What the model is sent for one tool's parameters; bigger is a mistake, not a tool.
MAX_SCHEMA_BYTES = 16 * 1024
# How much of a validation failure the model is told.
_MAX_ERRORS_SHOWN = 5
_MAX_LOC_CHARS = 80
_MAX_MSG_CHARS = 200

# Keys whose values are data, not schemas: a "title" inside them is not pydantic's title.
_DATA_KEYS = frozenset({"default", "enum", "const", "examples"})


class ToolDefinitionError(TypeError):
    """A function that cannot become a tool (raised when it is decorated)."""


@dataclass(frozen=True)
class Arguments:
    """How to turn the model's JSON arguments into the function's keyword arguments."""

    model: type[BaseModel]
    fields: dict[str, str]  # parameter name -> field name in `model`
    takes_context: bool
    # Parameters with a default that cannot be None: a null for one means "the default",
    # as models send null for arguments they mean to leave out.
    null_is_default: frozenset[str] = frozenset()

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments for the function; ToolError("InvalidArguments") if invalid."""
        given = {k: v for k, v in args.items() if v is not None or k not in self.null_is_default}
        try:
            text = json.dumps(given)
        except (TypeError, ValueError):
            raise ToolError("InvalidArguments", "the tool arguments must be JSON values") from None
        try:
            try:
                parsed = self.model.model_validate_json(text, strict=True)
            except ValidationError as err:
                if not any(e["type"] == "json_invalid" for e in err.errors()):
                    raise
                # Only a lone surrogate in a string makes our own JSON unreadable: the strings
                # go in as they are (strict Python mode), for the tool to say what is wrong.
                parsed = self.model.model_validate(given, strict=True)
        except ValidationError as err:
            raise ToolError("InvalidArguments", describe_errors(err)) from None
        return {param: getattr(parsed, name) for param, name in self.fields.items()}


def arguments_of(fn: Any, tool_name: str, hints: dict[str, Any]) -> Arguments:
    """The argument model of `fn`; ToolDefinitionError if its signature cannot be described."""
    params = list(inspect.signature(fn).parameters.values())
    takes_context = bool(params) and hints.get(params[0].name) is ToolContext
    if takes_context:
        params = params[1:]
    definitions: dict[str, Any] = {}
    fields: dict[str, str] = {}
    null_is_default: set[str] = set()
    for i, param in enumerate(params):
        where = f"parameter {param.name!r} of tool {tool_name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args and **kwargs cannot be described")
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"{where} is positional-only; arguments come by name")
        if param.name not in hints:
            raise ToolDefinitionError(f"{where} has no type hint")
        if hints[param.name] is ToolContext:
            raise ToolDefinitionError(f"{where}: the ToolContext must be the first parameter")
        default = ... if param.default is param.empty else param.default
        if default is not ... and not _admits_none(hints[param.name]):
            null_is_default.add(param.name)
        name = f"arg{i}"
        definitions[name] = (Annotated[hints[param.name], Field(alias=param.name)], default)
        fields[param.name] = name
    try:
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", protected_namespaces=()),
            **definitions,
        )
    except Exception as err:  # pydantic's own words for a type it cannot take
        raise ToolDefinitionError(f"tool {tool_name!r}: {err}") from err
    return Arguments(model, fields, takes_context, frozenset(null_is_default))


def _admits_none(hint: Any) -> bool:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if hint is None or hint is type(None) or hint is Any:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_admits_none(h) for h in typing.get_args(hint))
    return False


def parameters_schema(arguments: Arguments, tool_name: str, docs: dict[str, str]) -> dict[str, Any]:
    """The JSON schema the model sees: pydantic's, without titles, with `X | None = None`
    shown as an optional X, and descriptions from the docstring where the type has none."""
    try:
        raw = arguments.model.model_json_schema(by_alias=True)
    except Exception as err:
        raise ToolDefinitionError(f"tool {tool_name!r}: no JSON schema: {err}") from err
    schema: dict[str, Any] = _without_titles(raw)
    properties: dict[str, Any] = schema.setdefault("properties", {})
    for name, prop in list(properties.items()):
        prop = _optional_as_omittable(prop)
        if name in docs and "description" not in prop:
            prop["description"] = docs[name]
        properties[name] = prop
    schema["additionalProperties"] = False
    size = len(json.dumps(schema))
    if size > MAX_SCHEMA_BYTES:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: its JSON schema is {size} bytes, over {MAX_SCHEMA_BYTES}"
        )
    return schema


def _without_titles(node: Any) -> Any:
    if isinstance(node, list):
        return [_without_titles(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue  # pydantic's "Days" for `days` tells the model nothing
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _without_titles(prop) for name, prop in value.items()}
        elif key in _DATA_KEYS:
            out[key] = value
        else:
            out[key] = _without_titles(value)
    return out


def _optional_as_omittable(prop: dict[str, Any]) -> dict[str, Any]:
    """`{"anyOf": [X, {"type": "null"}], "default": null}` -> X: the model leaves it out."""
    options = prop.get("anyOf")
    if prop.get("default", ...) is not None or not isinstance(options, list) or len(options) != 2:
        return dict(prop)
    rest = [o for o in options if o != {"type": "null"}]
    if len(rest) != 1:
        return dict(prop)
    merged = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
    return {**rest[0], **merged}


def _loc(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return repr(text[:_MAX_LOC_CHARS])


def _error_words(error: ErrorDetails) -> str:
    if error["type"] == "missing":
        return f"missing required argument {_loc(error['loc'])}"
    if error["type"] == "json_invalid":
        return "the arguments are not valid JSON text (an unpaired surrogate in a string?)"
    msg = error["msg"]
    msg = msg if len(msg) <= _MAX_MSG_CHARS else msg[:_MAX_MSG_CHARS] + "..."
    return f"argument {_loc(error['loc'])}: {msg}" if error["loc"] else msg


def describe_errors(err: ValidationError) -> str:
    """Every invalid field named with the reason, bounded, never echoing the input."""
    errors = err.errors(include_url=False, include_input=False, include_context=False)
    shown = "; ".join(_error_words(e) for e in errors[:_MAX_ERRORS_SHOWN])
    more = len(errors) - _MAX_ERRORS_SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")
