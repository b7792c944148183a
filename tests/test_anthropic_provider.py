"""AnthropicProvider against a fake Messages API server on localhost.

Only the remote LLM is faked, at its HTTP interface: the real ``anthropic`` SDK and its HTTP
stack make the requests, so these tests see exactly what would go over the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from durable_agents.activities.providers import errors
from durable_agents.activities.providers.anthropic_provider import AnthropicProvider
from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelRequest,
    ProviderCall,
    ToolSpec,
)
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.workers.settings import ModelSettings
from tests.support.fake_anthropic import (
    FakeAnthropic,
    fake_anthropic_server,  # noqa: F401 (the `server` fixture)
    message,
    tool_use_reply,
)

API_KEY = "sk-ant-test-SECRET-0123456789abcdef"
PROMPT_MARKER = "PROMPT-MARKER-do-not-leak"


@pytest.fixture
async def provider(server: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key=API_KEY, model="claude-x", timeout=5, base_url=server.url)
    yield p
    await p.aclose()


READ_FILE = ToolSpec(
    name="read_file",
    description="Read a workspace file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def request(*messages: ChatMessage, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model="claude-fake",
        messages=list(messages) or [ChatMessage(role="user", content=PROMPT_MARKER)],
        tools=tools if tools is not None else [READ_FILE],
        idempotency_key="session-1/step-3",
        max_output_tokens=512,
    )


async def test_tool_call_round_trip(server: FakeAnthropic, provider: AnthropicProvider) -> None:
    server.reply = tool_use_reply({"path": "notes/b.txt"})
    reply = await provider.complete(
        request(
            ChatMessage(role="system", content="Be careful."),
            ChatMessage(role="user", content="Summarise a.txt and c.txt"),
            ChatMessage(
                role="assistant",
                content="Let me look.",
                tool_calls=(
                    ProviderCall(id="toolu_a", name="read_file", arguments={"path": "a.txt"}),
                    ProviderCall(id="toolu_c", name="read_file", arguments={"path": "c.txt"}),
                ),
            ),
            ChatMessage(role="tool", content="contents of a", tool_call_id="toolu_a"),
            ChatMessage(role="tool", content="contents of c", tool_call_id="toolu_c"),
        )
    )

    assert reply.tool_calls == [
        ProviderCall(id="toolu_2", name="read_file", arguments={"path": "notes/b.txt"})
    ]
    assert reply.text == "Reading it."
    assert reply.finish_reason == "tool_calls"
    # Cached prompt tokens count as input.
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (42, 9)
    # ...and the part read from the cache is reported as cached (cache writes are not).
    assert reply.usage.cached_tokens == 10
    assert reply.model == "claude-fake"

    assert len(server.requests) == 1
    body = server.requests[0].body
    assert body["model"] == "claude-fake"
    assert body["max_tokens"] == 512
    assert body["system"] == "Be careful."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Summarise a.txt and c.txt"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "read_file",
                    "input": {"path": "a.txt"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_c",
                    "name": "read_file",
                    "input": {"path": "c.txt"},
                },
            ],
        },
        # Both results in one user turn, as the API requires.
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "contents of a"},
                {"type": "tool_result", "tool_use_id": "toolu_c", "content": "contents of c"},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a workspace file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
async def test_stop_reason_mapping(
    server: FakeAnthropic, provider: AnthropicProvider, stop_reason: str, finish_reason: str
) -> None:
    server.reply = message([{"type": "text", "text": "hi"}], stop_reason)
    reply = await provider.complete(request(tools=[]))
    assert reply.finish_reason == finish_reason
    assert reply.text == "hi"
    body = server.requests[0].body
    assert "tools" not in body
    assert "system" not in body


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_request_that_requires_a_call_asks_for_any_tool(
    server: FakeAnthropic, provider: AnthropicProvider, streamed: bool
) -> None:
    server.reply = tool_use_reply({"path": "a.txt"})
    sink: list[str] = []

    async def on_text(piece: str) -> None:
        sink.append(piece)

    base = request()
    await provider.complete(
        replace(base, call_required=True, on_text=on_text if streamed else None)
    )
    await provider.complete(base)
    first, second = (r.body for r in server.requests)
    assert first["tool_choice"] == {"type": "any"}
    assert "tool_choice" not in second


async def test_idempotency_key_and_auth_headers_sent(
    server: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await provider.complete(request())
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["idempotency-key"] == "session-1/step-3"
    # anthropic 2.x sends the API key as a bearer token, no longer as x-api-key.
    assert headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (408, errors.MODEL_UNAVAILABLE, True),
        (409, errors.MODEL_UNAVAILABLE, True),
        (429, errors.MODEL_UNAVAILABLE, True),
        (500, errors.MODEL_UNAVAILABLE, True),
        (529, errors.MODEL_UNAVAILABLE, True),
        (401, errors.MODEL_AUTH_ERROR, False),
        (403, errors.MODEL_AUTH_ERROR, False),
        (400, errors.MODEL_REQUEST_REJECTED, False),
        (404, errors.MODEL_REQUEST_REJECTED, False),
        (413, errors.MODEL_REQUEST_REJECTED, False),
        (422, errors.MODEL_REQUEST_REJECTED, False),
    ],
)
async def test_status_maps_to_application_error(
    server: FakeAnthropic,
    provider: AnthropicProvider,
    status: int,
    error_type: str,
    retryable: bool,
) -> None:
    server.fail(status, "something went wrong")
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    err = caught.value
    assert err.type == error_type
    assert err.non_retryable is not retryable
    assert f"HTTP {status}" in err.message
    assert "anthropic" in err.message
    assert "something went wrong" in err.message
    # The SDK must not retry on its own: Temporal owns retries.
    assert len(server.requests) == 1
    assert err.__cause__ is None


async def test_500_is_one_http_request_per_call(
    server: FakeAnthropic, provider: AnthropicProvider
) -> None:
    server.fail(500, "boom")
    for _ in range(3):
        with pytest.raises(ProviderError):
            await provider.complete(request())
    assert len(server.requests) == 3


async def test_429_passes_retry_after_to_temporal(
    server: FakeAnthropic, provider: AnthropicProvider
) -> None:
    server.fail(429, "slow down", headers={"Retry-After": "7"})
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.type == errors.MODEL_UNAVAILABLE
    assert caught.value.next_retry_delay == timedelta(seconds=7)
    assert len(server.requests) == 1


async def test_api_key_and_prompt_never_in_error(
    server: FakeAnthropic, provider: AnthropicProvider
) -> None:
    server.fail(401, f"invalid x-api-key {API_KEY}")
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    text = f"{caught.value} {caught.value.message} {caught.value.details!r}"
    assert API_KEY not in text
    assert "SECRET" not in text
    assert PROMPT_MARKER not in text
    assert caught.value.type == errors.MODEL_AUTH_ERROR


@pytest.mark.parametrize("tool_input", ['{"path": "a.txt"', 17])
async def test_malformed_tool_input_does_not_crash(
    server: FakeAnthropic, provider: AnthropicProvider, tool_input: Any
) -> None:
    server.reply = tool_use_reply(tool_input)
    reply = await provider.complete(request())
    [call] = reply.tool_calls
    assert call.id == "toolu_2"
    assert set(call.arguments) == {errors.RAW_ARGUMENTS_KEY}


async def test_timeout_is_retryable(server: FakeAnthropic) -> None:
    server.delay = 0.5
    p = AnthropicProvider(api_key=API_KEY, model="m", timeout=0.1, base_url=server.url)
    try:
        with pytest.raises(ProviderError) as caught:
            await p.complete(request())
    finally:
        await p.aclose()
    assert caught.value.type == errors.MODEL_UNAVAILABLE
    assert not caught.value.non_retryable
    assert len(server.requests) == 1


def test_factory_anthropic_needs_key() -> None:
    with pytest.raises(ValueError, match="MODEL_API_KEY"):
        build_provider(ModelSettings(provider="anthropic", api_key=None))


async def test_factory_builds_anthropic_provider(server: FakeAnthropic) -> None:
    settings = ModelSettings(
        provider="anthropic", api_key=SecretStr(API_KEY), base_url=server.url, name="claude-y"
    )
    p = build_provider(settings)
    try:
        assert isinstance(p, AnthropicProvider)
        reply = await p.complete(request())
    finally:
        await p.aclose()
    assert reply.text == "hello"


async def test_a_tool_use_without_an_id_is_kept_with_an_empty_one(
    server: FakeAnthropic, provider: AnthropicProvider
) -> None:
    # call_model names every call itself; "" says there is no id of the server's to echo.
    server.reply = message(
        [{"type": "tool_use", "name": "read_file", "input": {"path": "a.txt"}}], "tool_use"
    )
    reply = await provider.complete(request())
    assert reply.tool_calls == [ProviderCall(id="", name="read_file", arguments={"path": "a.txt"})]
