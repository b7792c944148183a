"""The JSON schema of a waiting call's tool, and the check of edited arguments against it.

The schema comes from the context config the call's turn ran with (what the model was
shown), not from today's agent definition. The approvals inbox shows it so a page can
check edits as they are typed; approve checks them again here, on the server, and answers
422 naming the first bad field. Messages name fields and the schema's rules, never the
values: edited arguments can be secrets a user pasted.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from storage.context_configs import ContextConfigNotFound, ContextConfigRepository
from storage.models import ItemRow
from storage.turns import TurnRepository
from workers.gateway.errors import ApiError
from workers.gateway.schema_validator import LinearValidator, extra_properties

_META = Draft202012Validator(Draft202012Validator.META_SCHEMA)
# How much of a name the client chose (a property key) an error message shows.
_MAX_SHOWN_NAME = 60


async def call_schema(db: AsyncSession, tenant_id: str, call: ItemRow) -> dict[str, Any] | None:
    """The parameters schema of `call`'s tool as its turn recorded it; None when unknown
    (no turn config recorded, or a tool the config does not list)."""
    turns = TurnRepository(db, tenant_id)
    turn = await turns.get(call.turn_id) if call.turn_id is not None else None
    if turn is None or turn.context_config_id is None:
        return None
    try:
        config = await ContextConfigRepository(db, tenant_id).load(turn.context_config_id)
    except ContextConfigNotFound:
        return None
    for spec in config.tool_schemas:
        if spec.get("name") == call.tool_name:
            parameters = spec.get("parameters")
            return parameters if isinstance(parameters, dict) else None
    return None


def check_arguments(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> None:
    """Raise a 422 ApiError naming the first field of `arguments` that `schema` refuses."""
    if schema is None:
        return  # the tool validates its arguments itself when it runs
    if "properties" in schema and "additionalProperties" not in schema:
        # As activities.tools.args.check_allowed: declared properties are closed.
        schema = {**schema, "additionalProperties": False}
    # A tool's own broken schema is not the approver's mistake: left to the tool. (Not
    # check_schema: its format check compiles patterns with re, which refuses RE2 syntax.)
    if not _META.is_valid(schema):
        return
    errors = list(LinearValidator(schema).iter_errors(arguments))
    if not errors:
        return
    first = min(errors, key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    field, problem = _describe(first)
    raise ApiError(422, "invalid_arguments", f"edited arguments refused: {field!r} {problem}")


def _name(value: object) -> str:
    return str(value)[:_MAX_SHOWN_NAME]


def _describe(error: ValidationError) -> tuple[str, str]:
    """(field, what is wrong), from the schema's side of the error only."""
    path = ".".join(_name(p) for p in error.absolute_path)
    rule, expected = error.validator, error.validator_value
    instance = error.instance if isinstance(error.instance, dict) else {}
    if rule == "required" and isinstance(expected, list):
        missing = next((str(r) for r in expected if r not in instance), "?")
        return _join(path, missing), "is required"
    if rule == "additionalProperties":
        schema = error.schema if isinstance(error.schema, dict) else {}
        extra = next(iter(extra_properties(instance, schema)), "?")
        return _join(path, _name(extra)), "is not an argument of this tool"
    where = path or "(the arguments)"
    if rule == "type":
        return where, f"must be of type {expected}"
    if rule == "enum" and isinstance(expected, list):
        return where, f"must be one of {', '.join(map(repr, expected))[:200]}"
    return where, f"does not satisfy {rule} {_name(expected)}"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
