"""@tool: the schema from hints and docstring, argument validation, results, definitions
that cannot be described."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from durable_agents.activities.providers.errors import (
    CUT_ARGUMENTS_KEY,
    RAW_ARGUMENTS_KEY,
    cut_marked,
)
from durable_agents.activities.tools.base import Tool, ToolContext, ToolError, ToolOutput
from durable_agents.activities.tools.tool_schema import MAX_SCHEMA_BYTES
from durable_agents.activities.tools.typed import ToolDefinitionError, tool

CTX = ToolContext(idempotency_key="k", workspace=Path("."), tenant_id="t", session_id="s")


class Place(BaseModel):
    name: str
    country: str = "FR"


@tool(effect="read_only")
async def forecast(
    ctx: ToolContext,
    city: str,
    days: Annotated[int, Field(ge=1, le=14)] = 3,
    unit: Literal["c", "f"] = "c",
    near: Place | None = None,
    tags: list[str] | None = None,
    when: Annotated[str, Field(description="From the type: wins over the docstring.")] = "now",
) -> dict[str, Any]:
    """The weather ahead for a
    city, day by day.

    Longer notes the model does not need.

    Args:
        city: The city, e.g. "Lyon".
        days: How many days ahead,
            counting today.
        when: From the docstring.
    """
    return {
        "city": city,
        "days": days,
        "unit": unit,
        "near": near and near.name,
        "ctx": ctx.tenant_id,
    }


async def run(t: Tool, **args: Any) -> ToolOutput:
    return await t.fn(CTX, args)


async def refused(t: Tool, args: dict[str, Any]) -> str:
    with pytest.raises(ToolError) as err:
        await t.fn(CTX, args)
    assert err.value.error_type == "InvalidArguments"
    return err.value.message


# --- schema --------------------------------------------------------------------------


def test_schema_comes_from_hints_defaults_constraints_and_docstring() -> None:
    spec = forecast.spec
    assert spec.name == "forecast"
    assert spec.description == "The weather ahead for a city, day by day."
    params = spec.parameters
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["city"]  # defaults are not required
    props = params["properties"]
    assert props["city"] == {"type": "string", "description": 'The city, e.g. "Lyon".'}
    assert props["days"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 14,
        "default": 3,
        "description": "How many days ahead, counting today.",
    }
    assert props["unit"] == {"type": "string", "enum": ["c", "f"], "default": "c"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}  # `| None = None`
    assert props["near"] == {"$ref": "#/$defs/Place"}
    assert params["$defs"]["Place"]["properties"]["country"] == {"type": "string", "default": "FR"}
    assert props["when"]["description"] == "From the type: wins over the docstring."
    assert "title" not in json.dumps(params)


def test_effect_approval_and_reconcile_are_carried() -> None:
    async def check(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput | None:
        return None

    @tool(effect="effectful", needs_approval=True, reconcile=check, name="send-mail")
    def send(to: str) -> str:
        """Send a mail."""
        return to

    assert (send.spec.name, send.effect, send.needs_approval, send.reconcile) == (
        "send-mail",
        "effectful",
        True,
        check,
    )
    assert (forecast.effect, forecast.needs_approval) == ("read_only", False)


# --- validation ----------------------------------------------------------------------


async def test_valid_arguments_reach_the_function_typed() -> None:
    out = await run(forecast, city="Lyon", days=2, near={"name": "Villeurbanne"})
    assert json.loads(out.content) == {
        "city": "Lyon",
        "days": 2,
        "unit": "c",
        "near": "Villeurbanne",
        "ctx": "t",
    }
    # A null for an argument with a default means the default, as models send it.
    assert json.loads((await run(forecast, city="Lyon", days=None)).content)["days"] == 3


async def test_every_invalid_field_is_named_with_its_reason() -> None:
    message = await refused(forecast, {"city": 5, "days": 0, "unit": "k", "near": {"x": 1}})
    assert "argument 'city': Input should be a valid string" in message
    assert "argument 'days': Input should be greater than or equal to 1" in message
    assert "argument 'unit': Input should be 'c' or 'f'" in message
    assert "missing required argument 'near.name'" in message


async def test_json_types_are_strict() -> None:
    for args in (
        {"city": "x", "days": True},
        {"city": "x", "days": "2"},
        {"city": "x", "days": 1.5},
    ):
        assert "argument 'days'" in await refused(forecast, args)


async def test_errors_are_bounded_and_never_echo_values() -> None:
    secret = "s3cr3t-" * 5000

    @tool(effect="read_only")
    def many(a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int) -> str:
        """Takes many."""
        return "x"

    message = await refused(many, {k: secret for k in "abcdefgh"})
    assert "s3cr3t" not in message and len(message) < 1000
    assert message.count("argument '") == 5 and message.endswith("and 3 more")
    assert await refused(many, {}) == (
        "missing required argument 'a'; missing required argument 'b'; missing required "
        "argument 'c'; missing required argument 'd'; missing required argument 'e'; "
        "and 3 more"
    )


async def test_unknown_names_and_raw_arguments_are_refused_as_before() -> None:
    assert await refused(forecast, {"city": "x", "town": "y"}) == (
        "unknown argument 'town'; this tool takes: 'city', 'days', 'near', 'tags', 'unit', 'when'"
    )
    assert "not valid JSON" in await refused(forecast, {RAW_ARGUMENTS_KEY: "city=x"})


async def test_arguments_cut_at_the_reply_limit_are_told_as_cut_never_shown_back() -> None:
    sent = '{"city": "Lisbon", "tags": ["one line", "another line'
    cut = {RAW_ARGUMENTS_KEY: sent, CUT_ARGUMENTS_KEY: True}
    told = await refused(forecast, cut)
    assert told.startswith(
        "forecast did not run: the reply reached its output limit before the call's arguments "
        f"ended, {len(sent)} characters in. Call forecast again now with shorter arguments"
    )
    assert "Lisbon" not in told and "same lines" not in told
    assert cut_marked({RAW_ARGUMENTS_KEY: sent}, "length") == cut
    assert cut_marked({RAW_ARGUMENTS_KEY: sent}, "stop") == {RAW_ARGUMENTS_KEY: sent}
    assert cut_marked({"city": "x"}, "length") == {"city": "x"}


# --- results -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "declared", "content", "content_type"),
    [
        ("héllo", None, "héllo".encode(), "text/plain; charset=utf-8"),
        ("# hi", "text/markdown; charset=utf-8", b"# hi", "text/markdown; charset=utf-8"),
        (b"\x00\x01", None, b"\x00\x01", "application/octet-stream"),
        (b"\x89PNG", "image/png", b"\x89PNG", "image/png"),
        ({"b": 1, "a": "é"}, None, '{"a": "é", "b": 1}'.encode(), "application/json"),
        ([1, 2], None, b"[1, 2]", "application/json"),
        (Place(name="Lyon"), None, b'{"name":"Lyon","country":"FR"}', "application/json"),
        (ToolOutput(b"<p/>", "text/html"), None, b"<p/>", "text/html"),
    ],
)
async def test_each_result_type_gets_its_content_type(
    result: object, declared: str | None, content: bytes, content_type: str
) -> None:
    @tool(effect="read_only", content_type=declared)
    async def give() -> Any:
        """Give the result."""
        return result

    assert await run(give) == ToolOutput(content, content_type)


@pytest.mark.parametrize("result", [42, None, {"x": object()}, {1: "a", "b": 2}])
async def test_other_results_are_a_type_error_naming_the_tool(result: object) -> None:
    @tool(effect="read_only")
    async def broken() -> Any:
        """Return something unstorable."""
        return result

    with pytest.raises(TypeError, match="tool 'broken' returned"):
        await run(broken)


async def test_a_sync_function_runs_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()

    @tool(effect="read_only")
    def where(ctx: ToolContext, label: str) -> dict[str, Any]:
        """Which thread runs this."""
        return {"label": label, "thread": threading.get_ident(), "key": ctx.idempotency_key}

    out = json.loads((await run(where, label="x")).content)
    assert out["thread"] != loop_thread and (out["label"], out["key"]) == ("x", "k")
    # The loop stays free while it runs.
    assert await asyncio.wait_for(run(where, label="y"), 5)


# --- definitions that cannot be described ---------------------------------------------


def _star(*args: int) -> str:
    """Star args."""
    return ""


def _kw(**kwargs: int) -> str:
    """Keyword args."""
    return ""


def _unhinted(a, b: int) -> str:  # type: ignore[no-untyped-def]
    """No hint on a."""
    return ""


def _positional(a: int, /) -> str:
    """Positional-only."""
    return ""


def _undocumented(a: int) -> str:
    return ""


def _late_context(a: int, ctx: ToolContext) -> str:
    """Context not first."""
    return ""


def _huge(
    a: Annotated[str, Field(description="x" * MAX_SCHEMA_BYTES)],
) -> str:
    """A schema over the bound."""
    return ""


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (_star, "*args and **kwargs"),
        (_kw, "*args and **kwargs"),
        (_unhinted, "parameter 'a' of tool '_unhinted' has no type hint"),
        (_positional, "positional-only"),
        (_undocumented, "has no description"),
        (_late_context, "ToolContext must be the first parameter"),
        (_huge, "JSON schema is"),
    ],
)
def test_signatures_that_cannot_be_described_fail_at_decoration(fn: Any, words: str) -> None:
    with pytest.raises(ToolDefinitionError, match=words.replace("*", r"\*")):
        tool(effect="read_only")(fn)


def test_effect_and_name_are_checked() -> None:
    with pytest.raises(ToolDefinitionError, match="effect must be one of"):
        tool(effect="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="tool name"):
        tool(effect="read_only", name="has space")(_star)
    with pytest.raises(TypeError):
        tool()  # type: ignore[call-arg]  # every tool declares its effect


async def test_uuid_arguments_come_as_strings() -> None:
    @tool(effect="idempotent")
    async def drop(item: uuid.UUID) -> str:
        """Drop an item."""
        return str(item)

    assert drop.spec.parameters["properties"]["item"] == {"type": "string", "format": "uuid"}
    item = uuid.uuid4()
    assert (await run(drop, item=str(item))).content == str(item).encode()
