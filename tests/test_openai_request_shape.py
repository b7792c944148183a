"""What goes over the wire to an OpenAI-compatible server, as such servers need it, and the
tool calls a server hands back as plain text."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelRequest,
    ProviderCall,
    ToolSpec,
)
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.providers.openai_compat import (
    DEFAULT_BASE_URL,
    OpenAICompatibleProvider,
    budget_fields,
)
from durable_agents.activities.providers.strict_schema import strict_compatible
from durable_agents.workers.settings import ModelSettings
from tests.support.fake_openai import (
    FakeOpenAI,
    completion,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
)

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a workspace file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
CALLED = ChatMessage(
    role="assistant",
    content="",
    tool_calls=(ProviderCall(id="call_1", name="read_file", arguments={"path": "a"}),),
)


def request(*messages: ChatMessage, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model="m",
        messages=[ChatMessage(role="user", content="Read a."), *messages],
        tools=[READ_FILE] if tools is None else tools,
        idempotency_key="s:1:model",
        max_output_tokens=300,
    )


async def body_sent(server: FakeOpenAI, req: ModelRequest, **settings: str) -> dict[str, Any]:
    fields = {"provider": "openai", "base_url": server.url, **settings}
    p = build_provider(ModelSettings.model_validate(fields))
    try:
        await p.complete(req)
    finally:
        await p.aclose()
    return server.requests[-1].body


async def test_tool_choice_auto_only_when_tools_are_offered(server: FakeOpenAI) -> None:
    assert (await body_sent(server, request()))["tool_choice"] == "auto"
    assert "tool_choice" not in await body_sent(server, request(tools=[]))


async def test_a_request_that_requires_a_call_says_so_and_only_when_tools_are_offered(
    server: FakeOpenAI,
) -> None:
    assert (await body_sent(server, replace(request(), call_required=True)))["tool_choice"] == (
        "required"
    )
    assert "tool_choice" not in await body_sent(
        server, replace(request(tools=[]), call_required=True)
    )


async def test_assistant_tool_call_turn_has_empty_content_by_default(server: FakeOpenAI) -> None:
    body = await body_sent(server, request(CALLED))
    turn = body["messages"][1]
    assert turn["content"] == "" and turn["tool_calls"][0]["id"] == "call_1"


async def test_assistant_tool_content_omit_leaves_content_out(server: FakeOpenAI) -> None:
    body = await body_sent(server, request(CALLED), assistant_tool_content="omit")
    assert "content" not in body["messages"][1]


async def test_compatible_server_gets_both_budget_fields_by_default(server: FakeOpenAI) -> None:
    body = await body_sent(server, request())
    assert (body["max_tokens"], body["max_completion_tokens"]) == (300, 300)


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("max_tokens", {"max_tokens"}),
        ("max_completion_tokens", {"max_completion_tokens"}),
        ("both", {"max_tokens", "max_completion_tokens"}),
    ],
)
async def test_budget_field_setting(server: FakeOpenAI, choice: str, sent: set[str]) -> None:
    body = await body_sent(server, request(), max_tokens_field=choice)
    assert {k for k in body if k.startswith("max_")} == sent


async def test_temperature_is_sent_only_when_set(server: FakeOpenAI) -> None:
    assert "temperature" not in await body_sent(server, request())
    assert (await body_sent(server, request(), temperature="0"))["temperature"] == 0
    assert (await body_sent(server, request(), temperature="0.3"))["temperature"] == 0.3


def test_a_temperature_out_of_range_or_for_another_provider_is_refused() -> None:
    with pytest.raises(ValidationError, match="temperature"):
        ModelSettings(provider="openai", temperature=2.5)
    for provider in ("anthropic", "offline"):
        settings = ModelSettings(provider=provider, api_key="k", temperature=0.2)
        with pytest.raises(ValueError, match="MODEL_TEMPERATURE is for MODEL_PROVIDER=openai"):
            build_provider(settings)


def test_openai_itself_gets_only_max_completion_tokens() -> None:
    # Its reasoning models refuse max_tokens (no request to OpenAI from a test).
    for url in (None, DEFAULT_BASE_URL, DEFAULT_BASE_URL + "/"):
        assert budget_fields("auto", url) == {"max_completion_tokens"}
    assert budget_fields("auto", "http://127.0.0.1:8080/v1") == {
        "max_completion_tokens",
        "max_tokens",
    }


def test_request_shape_settings_are_validated() -> None:
    with pytest.raises(ValidationError, match="max_tokens_field"):
        ModelSettings(max_tokens_field="tokens")
    with pytest.raises(ValidationError, match="assistant_tool_content"):
        ModelSettings(assistant_tool_content="none")


async def test_tool_call_text_becomes_a_call(server: FakeOpenAI) -> None:
    server.reply = completion(
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>',
        },
        "stop",
    )
    p = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=5)
    try:
        reply = await p.complete(request())
    finally:
        await p.aclose()
    assert reply.tool_calls == [ProviderCall(id="", name="read_file", arguments={"path": "a"})]
    assert reply.text == ""


async def test_bare_json_is_an_answer_when_its_tool_was_not_offered(server: FakeOpenAI) -> None:
    text = '{"name": "read_file", "arguments": {"path": "a"}}'
    server.reply = completion({"role": "assistant", "content": text}, "stop")
    p = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=5)
    try:
        reply = await p.complete(request(tools=[]))
    finally:
        await p.aclose()
    assert (reply.text, reply.tool_calls) == (text, [])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_cut_at_its_limit_inside_repeated_calls_is_those_calls(
    server: FakeOpenAI, stream: bool
) -> None:
    call = '{"name": "read_file", "arguments": {"path": "a"}}\n'
    text = call * 12 + '{"name": "read_file", "argum'
    server.reply = completion({"role": "assistant", "content": text}, "length")
    p = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=5)
    req = request()
    if stream:
        req = replace(req, on_text=_ignore)
    try:
        reply = await p.complete(req)
    finally:
        await p.aclose()
    assert reply.tool_calls == [ProviderCall(id="", name="read_file", arguments={"path": "a"})]
    assert reply.text == ""


async def _ignore(text: str) -> None:
    return None


async def test_a_call_in_prose_is_read_as_a_call_at_every_step(server: FakeOpenAI) -> None:
    text = 'The fix:\n```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```\nDone.'
    server.reply = completion({"role": "assistant", "content": text}, "stop")
    failed = ChatMessage(
        role="tool", content="error (InvalidArguments): ...", tool_call_id="call_1"
    )
    worked = ChatMessage(role="tool", content="alpha", tool_call_id="call_1")
    p = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=5)
    try:
        first = await p.complete(request())
        retried = await p.complete(request(CALLED, failed))
        answered = await p.complete(request(CALLED, worked))
    finally:
        await p.aclose()
    for reply in (first, retried, answered):
        assert reply.tool_calls == [ProviderCall(id="", name="read_file", arguments={"path": "a"})]
        assert (reply.text, reply.finish_reason) == ("The fix:\n\nDone.", "tool_calls")


WRITE_FILE = ToolSpec(
    name="write_file",
    description="Write a workspace file.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
    },
)


async def test_a_tool_whose_schema_fits_strict_mode_is_sent_strict(server: FakeOpenAI) -> None:
    body = await body_sent(server, request(tools=[READ_FILE, WRITE_FILE]))
    functions = {t["function"]["name"]: t["function"] for t in body["tools"]}
    # The server constrains write_file's call to its schema; read_file's is open, so it
    # goes as it is (strict mode would refuse it) and the tool layer checks its calls.
    assert functions["write_file"]["strict"] is True
    assert "strict" not in functions["read_file"]
    off = await body_sent(server, request(tools=[WRITE_FILE]), strict_tools="off")
    assert "strict" not in off["tools"][0]["function"]
    with pytest.raises(ValidationError):
        ModelSettings.model_validate({"provider": "openai", "strict_tools": "always"})


def test_the_builtin_tools_strict_mode_accepts_are_the_closed_ones() -> None:
    from durable_agents.activities.tools.builtin import builtin_tools

    strict = sorted(t.spec.name for t in builtin_tools() if strict_compatible(t.spec.parameters))
    assert strict == ["append_file", "edit_file", "fetch_url", "write_file"]


CLOSED = {"type": "string"}


@pytest.mark.parametrize(
    ("schema", "fits"),
    [
        ({"type": "object", "properties": {}, "additionalProperties": False}, True),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": CLOSED}},
                "required": ["a"],
                "additionalProperties": False,
            },
            True,
        ),
        # Open objects, optional properties and defaults are outside strict mode.
        ({"type": "object", "properties": {"a": CLOSED}, "required": ["a"]}, False),
        (
            {
                "type": "object",
                "properties": {"a": CLOSED, "b": CLOSED},
                "required": ["a"],
                "additionalProperties": False,
            },
            False,
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "default": "x"}},
                "required": ["a"],
                "additionalProperties": False,
            },
            False,
        ),
        # A nested object is held to the same rules.
        (
            {
                "type": "object",
                "properties": {"o": {"type": "object", "properties": {"x": CLOSED}}},
                "required": ["o"],
                "additionalProperties": False,
            },
            False,
        ),
        ({"type": "object"}, False),
        ({"type": "string"}, False),
    ],
)
def test_strict_mode_is_claimed_only_for_schemas_wholly_inside_it(
    schema: dict[str, Any], fits: bool
) -> None:
    assert strict_compatible(schema) is fits
