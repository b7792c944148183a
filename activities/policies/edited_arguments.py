"""The JSON schema of a waiting call's tool, and the check of edited arguments against it.

The schema comes from the context config the call's turn ran with (what the model was
shown), not from today's agent definition. The approvals inbox shows it so a page can
check edits as they are typed; every approve checks them again (workers/client/service.py:
agentctl, the gateway, the Python API alike) and refuses naming every bad field (in the
message and, one by one, in `problems`), so an approver fixes an edit in one go. Messages
name fields and the schema's rules, never the values: edited arguments can be secrets a
user pasted.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from durable_agents.activities.policies.schema_validator import LinearValidator, extra_properties
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.context_configs import ContextConfigNotFound
from durable_agents.storage.models import ItemRow

_META = Draft202012Validator(Draft202012Validator.META_SCHEMA)
# How much of a name the client chose (a property key) an error message shows.
_MAX_SHOWN_NAME = 60
# How many problems one refusal lists: enough for any hand edit, bounded for a pasted blob.
MAX_LISTED_PROBLEMS = 20


class InvalidEdit(ValueError):
    """Edited arguments the call's tool schema refuses; `problems` names each bad field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"edited arguments refused: {'; '.join(problems)}")
        self.problems = problems


async def call_schema(st: AgentState, call: ItemRow) -> dict[str, Any] | None:
    """The parameters schema of `call`'s tool as its turn recorded it; None when unknown
    (no turn config recorded, or a tool the config does not list)."""
    turn = await st.turns.get(call.turn_id) if call.turn_id is not None else None
    if turn is None or turn.context_config_id is None:
        return None
    try:
        config = await st.configs.load(turn.context_config_id)
    except ContextConfigNotFound:
        return None
    for spec in config.tool_schemas:
        if spec.get("name") == call.tool_name:
            parameters = spec.get("parameters")
            return parameters if isinstance(parameters, dict) else None
    return None


def check_arguments(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> None:
    """InvalidEdit naming every field of `arguments` that `schema` refuses."""
    problems = argument_problems(schema, arguments)
    if problems:
        raise InvalidEdit(problems)


def argument_problems(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> list[str]:
    """What `schema` refuses in `arguments`, one "'field' what is wrong" each, shallow fields
    first (at most MAX_LISTED_PROBLEMS, the last saying how many more); [] when acceptable."""
    if schema is None:
        return []  # the tool validates its arguments itself when it runs
    if "properties" in schema and "additionalProperties" not in schema:
        # As durable_agents.activities.tools.args.check_allowed: declared properties are closed.
        schema = {**schema, "additionalProperties": False}
    # A tool's own broken schema is not the approver's mistake: left to the tool. (Not
    # check_schema: its format check compiles patterns with re, which refuses RE2 syntax.)
    if not _META.is_valid(schema):
        return []
    found = {
        (field, problem)
        for error in LinearValidator(schema).iter_errors(arguments)
        for field, problem in _describe(error)
    }
    # Shallow fields first, then by name: the same edit is always refused in the same words.
    lines = [f"{_shown(f)!r} {p}" for f, p in sorted(found, key=lambda fp: (len(fp[0]), fp))]
    if len(lines) > MAX_LISTED_PROBLEMS:
        more = len(lines) - MAX_LISTED_PROBLEMS + 1
        lines = [*lines[: MAX_LISTED_PROBLEMS - 1], f"and {more} more"]
    return lines


def _name(value: object) -> str:
    return str(value)[:_MAX_SHOWN_NAME]


def _shown(field: tuple[str, ...]) -> str:
    return ".".join(field) or "(the arguments)"


def _describe(error: ValidationError) -> list[tuple[tuple[str, ...], str]]:
    """[(field path, what is wrong)], from the schema's side of the error only."""
    path = tuple(_name(p) for p in error.absolute_path)
    rule, expected = error.validator, error.validator_value
    instance = error.instance if isinstance(error.instance, dict) else {}
    if rule == "required" and isinstance(expected, list):
        missing = [str(r) for r in expected if r not in instance] or ["?"]
        return [((*path, _name(m)), "is required") for m in missing]
    if rule == "additionalProperties":
        schema = error.schema if isinstance(error.schema, dict) else {}
        extras = extra_properties(instance, schema) or ["?"]
        return [((*path, _name(x)), "is not an argument of this tool") for x in extras]
    if rule == "type":
        return [(path, f"must be of type {expected}")]
    if rule == "enum" and isinstance(expected, list):
        return [(path, f"must be one of {', '.join(map(repr, expected))[:200]}")]
    return [(path, f"does not satisfy {rule} {_name(expected)}")]
