"""OpenAICompatibleProvider against a fake Chat Completions server on localhost.

Only the remote LLM is faked, at its HTTP interface: the real ``openai`` SDK and its HTTP
stack make the requests, so these tests see exactly what would go over the wire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from pydantic import SecretStr

from durable_agents.activities.providers import errors
from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelRequest,
    ProviderCall,
    ToolSpec,
)
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.settings import ModelSettings
from tests.support.fake_openai import (
    FakeOpenAI,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    tool_call_reply,
)

API_KEY = "sk-test-SECRET-0123456789abcdef"
PROMPT_MARKER = "PROMPT-MARKER-do-not-leak"


@pytest.fixture
async def provider(server: FakeOpenAI) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider(base_url=server.url, api_key=API_KEY, model="gpt-x", timeout=5)
    yield p
    await p.aclose()


READ_FILE = ToolSpec(
    name="read_file",
    description="Read a workspace file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def request(*messages: ChatMessage, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model="gpt-fake",
        messages=list(messages) or [ChatMessage(role="user", content=PROMPT_MARKER)],
        tools=tools if tools is not None else [READ_FILE],
        idempotency_key="session-1/step-3",
        max_output_tokens=512,
    )


async def test_tool_call_round_trip(server: FakeOpenAI, provider: OpenAICompatibleProvider) -> None:
    server.reply = tool_call_reply('{"path": "notes/b.txt"}')
    reply = await provider.complete(
        request(
            ChatMessage(role="system", content="Be careful."),
            ChatMessage(role="user", content="Summarise a.txt"),
            ChatMessage(
                role="assistant",
                content="",
                tool_calls=(ProviderCall(id="call_1", name="read_file", arguments={"path": "a"}),),
            ),
            ChatMessage(role="tool", content="contents of a", tool_call_id="call_1"),
        )
    )

    assert reply.tool_calls == [
        ProviderCall(id="call_2", name="read_file", arguments={"path": "notes/b.txt"})
    ]
    assert reply.text == ""
    assert reply.finish_reason == "tool_calls"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (42, 7)
    assert reply.model == "gpt-fake"

    assert len(server.requests) == 1
    body = server.requests[0].body
    assert body["model"] == "gpt-fake"
    assert body["max_completion_tokens"] == 512
    assert body["messages"] == [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "Summarise a.txt"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "contents of a"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a workspace file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]


async def test_plain_text_reply_and_no_tools(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    reply = await provider.complete(request(tools=[]))
    assert reply.text == "hello"
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert "tools" not in server.requests[0].body


async def test_idempotency_key_and_auth_headers_sent(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    await provider.complete(request())
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["idempotency-key"] == "session-1/step-3"
    assert headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (408, errors.MODEL_UNAVAILABLE, True),
        (409, errors.MODEL_UNAVAILABLE, True),
        (429, errors.MODEL_UNAVAILABLE, True),
        (500, errors.MODEL_UNAVAILABLE, True),
        (502, errors.MODEL_UNAVAILABLE, True),
        (503, errors.MODEL_UNAVAILABLE, True),
        (401, errors.MODEL_AUTH_ERROR, False),
        (403, errors.MODEL_AUTH_ERROR, False),
        (400, errors.MODEL_REQUEST_REJECTED, False),
        (404, errors.MODEL_REQUEST_REJECTED, False),
        (413, errors.MODEL_REQUEST_REJECTED, False),
        (422, errors.MODEL_REQUEST_REJECTED, False),
        (418, errors.MODEL_REQUEST_REJECTED, False),
    ],
)
async def test_status_maps_to_application_error(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
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
    assert "openai" in err.message
    assert "something went wrong" in err.message
    # The SDK must not retry on its own: Temporal owns retries.
    assert len(server.requests) == 1
    # No SDK exception chained in: it would be serialized into workflow history.
    assert err.__cause__ is None


async def test_500_is_one_http_request_per_call(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    server.fail(500, "boom")
    for _ in range(3):
        with pytest.raises(ProviderError):
            await provider.complete(request())
    assert len(server.requests) == 3


async def test_429_passes_retry_after_to_temporal(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    server.fail(429, "slow down", headers={"Retry-After": "7"})
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.type == errors.MODEL_UNAVAILABLE
    assert caught.value.next_retry_delay == timedelta(seconds=7)
    assert len(server.requests) == 1


async def test_429_without_retry_after_leaves_delay_to_policy(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    server.fail(429, "slow down")
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.next_retry_delay is None


async def test_api_key_and_prompt_never_in_error(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    # Vendors echo (parts of) the key back in auth errors.
    server.fail(401, f"Incorrect API key provided: {API_KEY}. Get one at example.com.")
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    text = f"{caught.value} {caught.value.message} {caught.value.details!r}"
    assert API_KEY not in text
    assert "SECRET" not in text
    assert PROMPT_MARKER not in text
    assert caught.value.type == errors.MODEL_AUTH_ERROR


async def test_malformed_tool_arguments_do_not_crash(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    server.reply = tool_call_reply('{"path": "a.txt"')
    reply = await provider.complete(request())
    assert reply.tool_calls == [
        ProviderCall(id="call_2", name="read_file", arguments={"_raw": '{"path": "a.txt"'})
    ]


async def test_raw_arguments_are_echoed_as_a_json_object(
    server: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    bad = ProviderCall(id="c", name="read_file", arguments={errors.RAW_ARGUMENTS_KEY: "{oops"})
    await provider.complete(
        request(
            ChatMessage(role="user", content="hi"),
            ChatMessage(role="assistant", content="", tool_calls=(bad,)),
            ChatMessage(role="tool", content="invalid arguments", tool_call_id="c"),
        )
    )
    sent = server.requests[0].body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    # Still what the model wrote, inside an object a chat template can parse (llama.cpp
    # refuses invalid JSON here with HTTP 500).
    assert json.loads(sent) == {errors.RAW_ARGUMENTS_KEY: "{oops"}


async def test_timeout_is_retryable(server: FakeOpenAI) -> None:
    server.delay = 0.5
    p = OpenAICompatibleProvider(base_url=server.url, api_key=API_KEY, model="m", timeout=0.1)
    try:
        with pytest.raises(ProviderError) as caught:
            await p.complete(request())
    finally:
        await p.aclose()
    assert caught.value.type == errors.MODEL_UNAVAILABLE
    assert not caught.value.non_retryable
    assert "timed out" in caught.value.message
    assert len(server.requests) == 1


async def test_connection_refused_is_retryable() -> None:
    # Bind and release a port, so nothing listens on it.
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    p = OpenAICompatibleProvider(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, model="m", timeout=2
    )
    try:
        with pytest.raises(ProviderError) as caught:
            await p.complete(request())
    finally:
        await p.aclose()
    assert caught.value.type == errors.MODEL_UNAVAILABLE
    assert not caught.value.non_retryable
    assert API_KEY not in str(caught.value)


def test_retry_after_parsing() -> None:
    assert errors.retry_after_delay({"retry-after": "1.5"}) == timedelta(seconds=1.5)
    assert errors.retry_after_delay({"Retry-After-Ms": "250"}) == timedelta(milliseconds=250)
    assert errors.retry_after_delay(
        {"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412480.0
    ) == timedelta(seconds=30)
    assert errors.retry_after_delay({"Retry-After": "soon"}) is None
    assert errors.retry_after_delay({"Retry-After": "-3"}) is None
    assert errors.retry_after_delay({"Retry-After": "86400"}) == timedelta(minutes=10)
    assert errors.retry_after_delay(None) is None


def test_parse_tool_arguments() -> None:
    assert errors.parse_tool_arguments('{"a": 1}') == {"a": 1}
    assert errors.parse_tool_arguments("") == {}
    assert errors.parse_tool_arguments("[1, 2]") == {"_raw": "[1, 2]"}
    assert errors.parse_tool_arguments({"a": 1}) == {"a": 1}


def test_factory_requires_explicit_provider() -> None:
    with pytest.raises(ValueError, match="MODEL_PROVIDER"):
        build_provider(ModelSettings(provider=None))


def test_factory_openai_needs_key_or_base_url() -> None:
    with pytest.raises(ValueError, match="MODEL_API_KEY"):
        build_provider(ModelSettings(provider="openai", base_url=None, api_key=None))


async def test_factory_builds_openai_provider(server: FakeOpenAI) -> None:
    # A keyless OpenAI-compatible server is fine when it has a base URL.
    p = build_provider(ModelSettings(provider="openai", base_url=server.url, name="local-model"))
    try:
        assert isinstance(p, OpenAICompatibleProvider)
        reply = await p.complete(request())
    finally:
        await p.aclose()
    assert reply.text == "hello"
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert API_KEY not in headers.get("authorization", "")


async def test_factory_sends_key_from_secretstr(server: FakeOpenAI) -> None:
    settings = ModelSettings(provider="openai", base_url=server.url, api_key=SecretStr(API_KEY))
    p = build_provider(settings)
    try:
        await p.complete(request())
    finally:
        await p.aclose()
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["authorization"] == f"Bearer {API_KEY}"
