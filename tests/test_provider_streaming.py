"""Providers given a text sink stream the reply: each piece of its text reaches the sink as
it arrives, and the reply returned is the one the same answer gives unstreamed. Mid-stream
failures are the ProviderErrors of today. The remote LLMs are faked at their HTTP
interface (the real SDKs read the streams)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from durable_agents.activities.providers import errors
from durable_agents.activities.providers.anthropic_provider import AnthropicProvider
from durable_agents.activities.providers.base import ChatMessage, ModelRequest, ToolSpec
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.activities.providers.offline import OfflineProvider, pieces_of
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from tests.support.fake_anthropic import FakeAnthropic, tool_use_reply
from tests.support.fake_anthropic import message as anthropic_message
from tests.support.fake_openai import FakeOpenAI, calls, says, text_pieces

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a workspace file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
REPLY = "The answer is forty two, and here is why it matters."
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Pieces:
    """A text sink that keeps what it hears."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def __call__(self, piece: str) -> None:
        self.heard.append(piece)


def request(sink: Pieces | None, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model="m",
        messages=[ChatMessage(role="user", content="What is the answer?")],
        tools=tools or [],
        idempotency_key="s/1",
        on_text=sink,
    )


async def _running(handler: Handler, path: str) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest.fixture
async def openai_fake() -> AsyncIterator[tuple[FakeOpenAI, OpenAICompatibleProvider]]:
    fake = FakeOpenAI(reply=says(REPLY))
    runner, url = await _running(fake.handle, "/v1/chat/completions")
    provider = OpenAICompatibleProvider(f"{url}/v1", None, "m", timeout=5)
    yield fake, provider
    await provider.aclose()
    await runner.cleanup()


@pytest.fixture
async def anthropic_fake() -> AsyncIterator[tuple[FakeAnthropic, AnthropicProvider]]:
    fake = FakeAnthropic(reply=anthropic_message([{"type": "text", "text": REPLY}], "end_turn"))
    runner, url = await _running(fake.handle, "/v1/messages")
    provider = AnthropicProvider(api_key="sk-ant-x", model="m", timeout=5, base_url=url)
    yield fake, provider
    await provider.aclose()
    await runner.cleanup()


async def test_openai_streams_text_pieces_and_returns_the_whole_reply(
    openai_fake: tuple[FakeOpenAI, OpenAICompatibleProvider],
) -> None:
    fake, provider = openai_fake
    sink = Pieces()
    streamed = await provider.complete(request(sink))
    body = fake.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert sink.heard == text_pieces(REPLY) and len(sink.heard) > 1
    whole = await provider.complete(request(None))
    assert "stream" not in fake.requests[1].body
    assert streamed == whole
    assert streamed.text == REPLY and streamed.usage.input_tokens == 42
    assert streamed.finish_reason == "stop" and streamed.model == "gpt-fake"


async def test_openai_tool_calls_are_put_together_across_chunks(
    openai_fake: tuple[FakeOpenAI, OpenAICompatibleProvider],
) -> None:
    fake, provider = openai_fake
    fake.reply = calls(
        {"name": "read_file", "arguments": {"path": "notes/a.txt"}},
        {"name": "read_file", "arguments": {"path": "b.txt"}},
    )
    reply = await provider.complete(request(Pieces(), [READ_FILE]))
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_0", "read_file", {"path": "notes/a.txt"}),
        ("call_1", "read_file", {"path": "b.txt"}),
    ]
    assert reply.finish_reason == "tool_calls"


async def test_openai_text_tool_calls_are_parsed_from_the_streamed_text(
    openai_fake: tuple[FakeOpenAI, OpenAICompatibleProvider],
) -> None:
    fake, provider = openai_fake
    written = '<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>'
    fake.reply = says(written)
    sink = Pieces()
    reply = await provider.complete(request(sink, [READ_FILE]))
    assert "".join(sink.heard) == written  # the preview is what the model wrote
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("read_file", {"path": "a.txt"})]
    assert reply.text == "" and reply.finish_reason == "tool_calls"


@pytest.mark.parametrize("after", [1, 3])
async def test_openai_a_dropped_stream_is_a_retryable_connection_error(
    openai_fake: tuple[FakeOpenAI, OpenAICompatibleProvider], after: int
) -> None:
    fake, provider = openai_fake
    fake.drop_after = {0: after}
    sink = Pieces()
    with pytest.raises(ProviderError) as err:
        await provider.complete(request(sink))
    assert err.value.type == errors.MODEL_UNAVAILABLE and not err.value.non_retryable
    assert "could not be reached" in str(err.value)
    assert sink.heard == text_pieces(REPLY)[: after - 1]  # chunk 0 carries no text


async def test_openai_a_bad_chunk_or_a_cut_stream_is_a_bad_response() -> None:
    async def garbage(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: {not json\n\n")
        return response

    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        chunk += '"choices":[{"index":0,"delta":{"content":"half a"},"finish_reason":null}]}'
        await response.write(f"data: {chunk}\n\n".encode())
        await response.write_eof()  # a clean end, but no finish_reason and no [DONE]
        return response

    for handler in (garbage, cut):
        runner, url = await _running(handler, "/v1/chat/completions")
        provider = OpenAICompatibleProvider(f"{url}/v1", None, "m", timeout=5)
        try:
            with pytest.raises(ProviderError) as err:
                await provider.complete(request(Pieces()))
            assert err.value.type == errors.MODEL_UNAVAILABLE and not err.value.non_retryable
            assert "unusable reply" in str(err.value)
        finally:
            await provider.aclose()
            await runner.cleanup()


async def test_anthropic_streams_text_and_tool_input(
    anthropic_fake: tuple[FakeAnthropic, AnthropicProvider],
) -> None:
    fake, provider = anthropic_fake
    sink = Pieces()
    streamed = await provider.complete(request(sink))
    assert fake.requests[0].body["stream"] is True
    assert "".join(sink.heard) == REPLY and len(sink.heard) > 1
    assert streamed == await provider.complete(request(None))
    assert streamed.usage.input_tokens == 42 and streamed.usage.output_tokens == 9
    fake.reply = tool_use_reply({"path": "notes/b.txt"})
    sink = Pieces()
    reply = await provider.complete(request(sink, [READ_FILE]))
    assert sink.heard == ["Reading", " it."]
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("toolu_2", "read_file", {"path": "notes/b.txt"})
    ]
    assert reply.text == "Reading it." and reply.finish_reason == "tool_calls"


async def test_anthropic_a_dropped_stream_is_a_retryable_error(
    anthropic_fake: tuple[FakeAnthropic, AnthropicProvider],
) -> None:
    fake, provider = anthropic_fake
    fake.drop_after = {0: 5}
    sink = Pieces()
    with pytest.raises(ProviderError) as err:
        await provider.complete(request(sink))
    assert err.value.type == errors.MODEL_UNAVAILABLE and not err.value.non_retryable
    assert sink.heard == ["The", " answer"]


async def test_offline_streams_its_reply_in_a_few_pieces() -> None:
    sink = Pieces()
    reply = await OfflineProvider().complete(request(sink))
    assert "".join(sink.heard) == reply.text and 1 < len(sink.heard) <= 4
    assert await OfflineProvider().complete(request(None)) == reply
    assert pieces_of("one") == ["one"] and pieces_of("") == []
    assert "".join(pieces_of("a b c d e f g h i")) == "a b c d e f g h i"
