"""An argument a tool's schema does not allow is reported, naming it, not silently ignored."""

from __future__ import annotations

from typing import Any

import pytest

from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.tools.args import check_allowed
from durable_agents.activities.tools.base import ToolError
from durable_agents.activities.tools.builtin import builtin_tools

PATH_ONLY = {"type": "object", "properties": {"path": {"type": "string"}}}


def refusal(args: dict[str, Any], schema: dict[str, Any]) -> str:
    with pytest.raises(ToolError) as caught:
        check_allowed(args, schema)
    assert caught.value.error_type == "InvalidArguments"
    return caught.value.message


@pytest.mark.parametrize("closed", [PATH_ONLY, {**PATH_ONLY, "additionalProperties": False}])
def test_unknown_argument_is_named_with_what_the_tool_takes(closed: dict[str, Any]) -> None:
    message = refusal({"path": "a", "encoding": "utf-8"}, closed)
    assert message == "unknown argument 'encoding'; this tool takes: 'path'"


@pytest.mark.parametrize(
    "schema",
    [
        {**PATH_ONLY, "additionalProperties": True},
        {**PATH_ONLY, "additionalProperties": {"type": "string"}},
        {"type": "object"},  # declares nothing, so takes anything
    ],
)
def test_open_schemas_allow_extras(schema: dict[str, Any]) -> None:
    check_allowed({"path": "a", "extra": 1}, schema)


def test_known_arguments_and_raw_arguments_pass() -> None:
    check_allowed({"path": "a"}, PATH_ONLY)
    check_allowed({}, PATH_ONLY)
    # Not JSON at all: check_args tells the model that, in the tool.
    check_allowed({RAW_ARGUMENTS_KEY: "path=a"}, PATH_ONLY)


def test_a_tool_without_parameters_refuses_any() -> None:
    message = refusal({"x": 1}, {"type": "object", "properties": {}})
    assert message == "unknown argument 'x'; this tool takes: none"


def test_many_and_long_names_are_bounded() -> None:
    args = {f"{'k' * 1000}{n:02}": n for n in range(30)}
    message = refusal(args, PATH_ONLY)
    assert message.startswith("unknown arguments ") and "and 20 more" in message
    assert len(message) < 1000


def test_every_builtin_tool_declares_its_properties() -> None:
    # Otherwise check_allowed would let anything through to it.
    for tool in builtin_tools():
        assert "properties" in tool.spec.parameters, tool.spec.name
