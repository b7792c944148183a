"""Overflow errors as real servers send them, through the providers' HTTP interfaces, and
the window a server advertises, asked of it over HTTP."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context_windows import ContextWindows
from durable_agents.activities.providers import errors
from durable_agents.activities.providers.anthropic_provider import AnthropicProvider
from durable_agents.activities.providers.base import ChatMessage, ModelRequest
from durable_agents.activities.providers.context_window import DiscoveredWindow, discover_window
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.activities.providers.overflow import Overflow, overflow_of, recognise_overflow
from tests.support.fake_openai import (
    FakeOpenAI,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
)
from tests.support.fake_window import (
    WindowedServer,
    windowed_server,  # noqa: F401 (the `windowed` fixture)
)
from tests.test_anthropic_provider import FakeAnthropic

PROMPT_MARKER = "PROMPT-MARKER-do-not-leak"
REQUEST = ModelRequest(
    model="m",
    messages=[ChatMessage("user", PROMPT_MARKER)],
    tools=[],
    idempotency_key="s/1",
    max_output_tokens=512,
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (  # llama.cpp server, recent: the numbers are fields as well
            {
                "error": {
                    "code": 400,
                    "message": "request (4476 tokens) exceeds the available context size "
                    "(4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 4476,
                    "n_ctx": 4096,
                }
            },
            Overflow(window=4096, prompt_tokens=4476),
        ),
        (  # llama.cpp server, older builds
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "invalid_request_error",
                }
            },
            Overflow(),
        ),
        (  # llama-cpp-python
            {"error": {"message": "Requested tokens (2829) exceed context window of 2048"}},
            Overflow(window=2048, prompt_tokens=2829),
        ),
        (  # vLLM (and OpenAI before 2024)
            {
                "object": "error",
                "message": "This model's maximum context length is 2048 tokens. However, you "
                "requested 2829 tokens (2317 in the messages, 512 in the completion). Please "
                "reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "code": 400,
            },
            Overflow(window=2048, prompt_tokens=2317, reply_tokens=512, total_tokens=2829),
        ),
        (  # vLLM, max_tokens larger than what is left
            {
                "error": {
                    "message": "'max_tokens' or 'max_completion_tokens' is too large: 2000. This "
                    "model's maximum context length is 4096 tokens and your request has 2104 "
                    "input tokens (2000 > 4096 - 2104).",
                    "type": "BadRequestError",
                }
            },
            Overflow(window=4096, prompt_tokens=2104),
        ),
        (  # vLLM, recent
            "This model's maximum context length is 128000 tokens. However, you requested 65535 "
            "output tokens and your prompt contains at least 62466 input tokens, for a total of "
            "at least 128001 tokens.",
            Overflow(window=128000, prompt_tokens=62466, reply_tokens=65535),
        ),
        (  # OpenAI
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. However, "
                    "your messages resulted in 130536 tokens. Please reduce the length of the "
                    "messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
            Overflow(window=128000, prompt_tokens=130536),
        ),
        (  # Anthropic
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 208656 tokens > 200000 maximum",
                },
            },
            Overflow(window=200000, prompt_tokens=208656),
        ),
        (  # Anthropic, prompt plus max_tokens
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "input length and `max_tokens` exceed context limit: 197202 + "
                    "8192 > 200000, decrease input length or `max_tokens` and try again",
                },
            },
            Overflow(window=200000, prompt_tokens=197202, reply_tokens=8192),
        ),
        ({"error": {"message": "Invalid value for 'temperature'", "type": "x"}}, None),
        ("Jinja Exception: System message must be at the beginning", None),
    ],
)
def test_real_overflow_errors_are_recognised_with_their_numbers(
    body: object, expected: Overflow | None
) -> None:
    assert recognise_overflow(body) == expected


async def test_an_openai_compatible_overflow_is_a_context_overflow_not_a_rejection(
    server: FakeOpenAI,
) -> None:
    """It was ModelRequestRejected, non-retryable: the task failed at once."""
    server.fail(
        400,
        "This model's maximum context length is 2048 tokens. However, you requested 2829 "
        "tokens (2317 in the messages, 512 in the completion). Please reduce the length of "
        "the messages or completion.",
    )
    provider = OpenAICompatibleProvider(server.url, None, "m", timeout=5)
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(REQUEST)
    finally:
        await provider.aclose()
    err = caught.value
    assert err.type == "ContextOverflow"
    assert not err.non_retryable
    assert overflow_of(err) == Overflow(2048, 2317, 512, 2829)
    assert "2048" in str(err) and PROMPT_MARKER not in str(err)


async def test_anthropic_prompt_is_too_long_is_a_context_overflow() -> None:
    fake = FakeAnthropic()
    fake.status = 400
    fake.reply = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208656 tokens > 200000 maximum",
        },
    }
    app = web.Application()
    app.router.add_post("/v1/messages", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    provider = AnthropicProvider(
        api_key="sk-ant-test-0123456789", model="c", timeout=5, base_url=url
    )
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(REQUEST)
    finally:
        await provider.aclose()
        await runner.cleanup()
    assert caught.value.type == "ContextOverflow"
    assert overflow_of(caught.value) == Overflow(window=200000, prompt_tokens=208656)


def test_other_errors_keep_their_types() -> None:
    assert errors.status_error("p", 400, body={"error": {"message": "bad"}}).type == (
        errors.MODEL_REQUEST_REJECTED
    )
    # A rate limit that mentions the context length is still a rate limit.
    busy = errors.status_error("p", 429, body="maximum context length is 10 tokens; slow down")
    assert busy.type == errors.MODEL_UNAVAILABLE


async def test_llama_cpp_props_is_asked_first(windowed: WindowedServer) -> None:
    windowed.n_ctx, windowed.props = 4096, True
    assert await discover_window(windowed.url, None, "m") == DiscoveredWindow(4096, "props")
    assert windowed.discovery_requests == ["/props"]


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "served", "object": "model", "max_model_len": 8192},  # vLLM
        {"id": "served", "object": "model", "meta": {"n_ctx_train": 8192, "n_vocab": 151936}},
    ],
)
async def test_the_model_listing_is_asked_next(
    windowed: WindowedServer, entry: dict[str, object]
) -> None:
    windowed.models = {"object": "list", "data": [entry]}
    assert await discover_window(windowed.url, None, "served") == DiscoveredWindow(8192, "models")
    assert windowed.discovery_requests == ["/props", "/v1/models"]


async def test_a_server_that_says_nothing_or_is_down_leaves_the_setting(
    windowed: WindowedServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert await discover_window(windowed.url, None, "m") is None
    with caplog.at_level(logging.INFO):
        assert await discover_window("http://127.0.0.1:9/v1", "sk-secret-key", "m") is None
    assert "discovery" in caplog.text and "sk-secret-key" not in caplog.text
    # api.openai.com advertises no window: nothing is asked.
    hosted = OpenAICompatibleProvider(None, "sk-x", "gpt-4o-mini", timeout=5)
    assert await hosted.context_window() is None
    await hosted.aclose()


class _Failing:
    def __init__(self) -> None:
        self.asked = 0

    async def context_window(self) -> DiscoveredWindow | None:
        self.asked += 1
        raise RuntimeError("boom")


async def test_discovery_is_tried_once_and_a_failure_only_costs_a_log_line() -> None:
    source = _Failing()
    windows = ContextWindows(source)
    budget = ContextBudget(context_tokens=32_000)
    for _ in range(3):
        await windows.discover("m")
        assert windows.budget("m", budget) == budget
    assert source.asked == 1


def test_learned_windows_shrink_the_budget_in_our_tokens() -> None:
    windows = ContextWindows()
    budget = ContextBudget(context_tokens=32_000, reply_tokens=2_048)
    # The server counted 2,000 tokens where we counted 1,000: its tokens are twice ours.
    windows.learn("m", Overflow(window=4_096, prompt_tokens=2_000), 1_000, budget)
    smaller = windows.budget("m", budget)
    assert smaller.reply_tokens == 1_024
    # 90% of the window, less the reply, halved into our tokens, plus the reply.
    assert smaller.context_tokens == (int(4_096 * 0.9) - 1_024) // 2 + 1_024
    assert windows.budget("other-model", budget) == budget
    # No numbers at all: each overflow sends a fixed share less than before.
    windows.learn("n", Overflow(), 10_000, budget)
    assert windows.budget("n", budget).context_tokens < 10_000 + budget.reply_tokens
