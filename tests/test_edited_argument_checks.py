"""The server's check of edited arguments against a tool's JSON schema: the first bad field
named with the schema's rule, never the value; regular expressions from the schema (an
MCP server's, untrusted) matched by RE2, in linear time; a schema or pattern it cannot use
leaves the check to the tool rather than failing the request."""

from __future__ import annotations

from typing import Any

import pytest

from durable_agents.activities.policies.edited_arguments import (
    MAX_LISTED_PROBLEMS,
    InvalidEdit,
    argument_problems,
    check_arguments,
)

SECRET = "s3cr3t-value"


def _refusal(schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    with pytest.raises(InvalidEdit) as caught:
        check_arguments(schema, arguments)
    assert SECRET not in str(caught.value) and not any(SECRET in p for p in caught.value.problems)
    return str(caught.value).removeprefix("edited arguments refused: ")


def test_the_first_bad_field_is_named_with_the_rule_never_the_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "mode": {"enum": ["fast", "safe"]},
            "opts": {"type": "object", "properties": {"depth": {"type": "integer"}}},
        },
        "required": ["n"],
    }
    assert _refusal(schema, {"mode": "fast"}) == "'n' is required"
    assert _refusal(schema, {"n": SECRET}) == "'n' must be of type integer"
    assert _refusal(schema, {"n": 0}) == "'n' does not satisfy minimum 1"
    assert _refusal(schema, {"n": 1, "mode": SECRET}) == "'mode' must be one of 'fast', 'safe'"
    assert _refusal(schema, {"n": 1, "opts": {"depth": SECRET}}) == (
        "'opts.depth' must be of type integer"
    )
    # Declared properties are closed, as the tools treat them (check_allowed).
    assert _refusal(schema, {"n": 1, "token": SECRET}) == "'token' is not an argument of this tool"
    check_arguments(schema, {"n": 2, "mode": "safe", "opts": {"depth": 3}})
    check_arguments({**schema, "additionalProperties": True}, {"n": 2, "extra": SECRET})


def test_schema_patterns_are_matched_by_re2() -> None:
    # \pN is RE2 syntax that Python's re refuses: this passes only on RE2.
    digits = {"type": "object", "properties": {"code": {"type": "string", "pattern": r"^\pN+$"}}}
    check_arguments(digits, {"code": "0123"})
    assert _refusal(digits, {"code": SECRET}) == "'code' does not satisfy pattern ^\\pN+$"
    by_name = {"type": "object", "patternProperties": {r"^\pL+$": {"type": "integer"}}}
    assert _refusal(by_name, {"abc": SECRET}) == "'abc' must be of type integer"
    closed = {**by_name, "additionalProperties": False}
    assert _refusal(closed, {"a1": 1}) == "'a1' is not an argument of this tool"
    # Exponential for a backtracking engine (2^40 paths), linear for RE2.
    nested = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    assert _refusal(nested, {"s": "a" * 40 + "!"}) == "'s' does not satisfy pattern ^(a+)+$"


def test_what_the_check_cannot_use_is_left_to_the_tool() -> None:
    backreference = {"type": "object", "properties": {"s": {"pattern": r"(a)\1"}}}
    check_arguments(backreference, {"s": "xy"})  # RE2 cannot take it: not checked here
    check_arguments({"type": "object", "properties": {"s": {"type": 12}}}, {"s": "x"})
    check_arguments(None, {"anything": SECRET})


def test_every_bad_field_is_named_at_once_shallow_first() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "m": {"type": "integer"},
            "opts": {"type": "object", "properties": {"depth": {"type": "integer"}}},
        },
        "required": ["n", "m", "k"],
    }
    arguments = {"opts": {"depth": SECRET}, "x": SECRET, "y": 1}
    with pytest.raises(InvalidEdit) as caught:
        check_arguments(schema, arguments)
    assert caught.value.problems == [
        "'k' is required",
        "'m' is required",
        "'n' is required",
        "'x' is not an argument of this tool",
        "'y' is not an argument of this tool",
        "'opts.depth' must be of type integer",
    ]
    assert str(caught.value) == "edited arguments refused: " + "; ".join(caught.value.problems)
    assert SECRET not in str(caught.value)


def test_a_pasted_blob_of_problems_is_listed_up_to_a_bound() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    arguments = {f"extra{i}": i for i in range(MAX_LISTED_PROBLEMS + 5)}
    problems = argument_problems(schema, arguments)
    assert len(problems) == MAX_LISTED_PROBLEMS
    assert problems[-1] == "and 6 more"
