"""What a caller sends the loop through Temporal itself (a plain start's AgentInput, an
update's or signal's input) decodes as its type says, or is refused in the command layer's
words: no coercion. The SDK's JSON converter would read `true` as 1 and `2.5` as 2 for an
int field, and fail the workflow task (leaving the workflow stuck) on `"100"` or `[1]`;
here each is InvalidTaskInput, a non-retryable failure: a start fails at once, an update is
rejected. A field the type does not have (an older option such as approval_overrides) is
refused too, never silently dropped.

Installed on every client of ours (workers/temporal_client.py), whose converter its workers
decode with. Payloads between our own activities and the loop stay lenient: they outlive a
deploy (tests/test_old_payloads.py).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

from temporalio.converter import (
    CompositePayloadConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    JSONTypeConverter,
)
from temporalio.exceptions import ApplicationError

from durable_agents.workflows.client_contracts import (
    ApproveInput,
    CancelInput,
    RaiseBudgetInput,
    RejectInput,
    SendMessageInput,
    TenantChangedInput,
)
from durable_agents.workflows.contracts import AgentInput

DOOR_TYPES: tuple[type, ...] = (
    AgentInput,
    ApproveInput,
    RejectInput,
    RaiseBudgetInput,
    CancelInput,
    SendMessageInput,
    TenantChangedInput,
)
# By name: the workflow sandbox imports its own copy of each contract class.
_DOORS = frozenset(f"{t.__module__}.{t.__qualname__}" for t in DOOR_TYPES)
# How deep a door payload nests (AgentInput -> CompactionRef); past it, refused.
_MAX_DEPTH = 4
_KINDS = {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}


class StrictInputs(JSONTypeConverter):
    def to_typed_value(self, hint: type, value: Any) -> Any:
        if f"{getattr(hint, '__module__', '')}.{getattr(hint, '__qualname__', '')}" not in _DOORS:
            return JSONTypeConverter.Unhandled
        problem = mistyped(hint, value, "")
        if problem is not None:
            field, words = problem
            raise ApplicationError(
                f"cannot take this input: {words}",
                field,
                type="InvalidTaskInput",
                non_retryable=True,
            )
        return JSONTypeConverter.Unhandled  # as the type says: the SDK's own decoding


class StrictPayloadConverter(CompositePayloadConverter):
    """The SDK's default converters, its JSON one with StrictInputs."""

    def __init__(self) -> None:
        super().__init__(
            *(
                JSONPlainPayloadConverter(custom_type_converters=[StrictInputs()])
                if isinstance(c, JSONPlainPayloadConverter)
                else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


def mistyped(hint: Any, value: Any, where: str, depth: int = 0) -> tuple[str, str] | None:
    """(field, what is wrong) for the first part of `value` its type `hint` does not allow
    as it is, else None."""
    if depth > _MAX_DEPTH:
        return where, f"{where} nests too deep"
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        tried = [mistyped(o, value, where, depth) for o in options if o is not type(None)]
        return None if any(t is None for t in tried) else tried[0]
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint, value, where, depth)
    if origin is list:
        if not isinstance(value, list):
            return where, f"{where} must be a list, got {_kind(value)}"
        (item,) = typing.get_args(hint) or (Any,)
        for n, element in enumerate(value):
            found = mistyped(item, element, f"{where}[{n}]", depth + 1)
            if found is not None:
                return found
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return where, f"{where} must be a JSON object, got {_kind(value)}"
        _, item = typing.get_args(hint) or (str, Any)
        for key, element in value.items():
            found = mistyped(item, element, f"{where}[{key!r}]"[:120], depth + 1)
            if found is not None:
                return found
        return None
    return _scalar(hint, value, where)


def _dataclass(hint: Any, value: Any, where: str, depth: int) -> tuple[str, str] | None:
    name = where or hint.__name__
    if not isinstance(value, dict):
        return name, f"{name} must be a JSON object, got {_kind(value)}"
    hints = typing.get_type_hints(hint)
    fields = {f.name for f in dataclasses.fields(hint)}
    unknown = sorted(str(k) for k in value if k not in fields)
    if unknown:
        shown = unknown[0][:60]
        return shown, f"{shown} is not a field of {hint.__name__}"
    for key, element in value.items():
        found = mistyped(hints[key], element, f"{where}.{key}" if where else key, depth + 1)
        if found is not None:
            return found
    return None


def _scalar(hint: Any, value: Any, where: str) -> tuple[str, str] | None:
    if hint is type(None):
        return None if value is None else (where, f"{where} must be null, got {_kind(value)}")
    kind = _KINDS.get(hint)
    if kind is None:
        return None  # a type the SDK decodes itself (no door field has one)
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, hint)
    return None if ok else (where, f"{where} must be {kind}, got {_kind(value)}")


def _kind(value: Any) -> str:
    return {type(None): "null", bool: "bool", int: "int", float: "float", str: "str"}.get(
        type(value), "list" if isinstance(value, list) else "object"
    )
