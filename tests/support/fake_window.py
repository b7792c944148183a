"""A fake Chat Completions server with a context window: the remote LLM of a local server
started with a small ``-c``, faked at its HTTP interface. Requests that do not fit are
refused with the error bodies real servers send (shapes: ``REFUSALS``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from durable_agents.vocabulary.tokens import count_tokens
from tests.support.fake_openai import answer, completion


def _llama(prompt: int, reply: int, n_ctx: int) -> dict[str, Any]:
    message = (
        f"request ({prompt} tokens) exceeds the available context size ({n_ctx} tokens), "
        "try increasing it"
    )
    return {
        "error": {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": n_ctx,
        }
    }


def _llama_old(prompt: int, reply: int, n_ctx: int) -> dict[str, Any]:
    message = "the request exceeds the available context size, try increasing it"
    return {"error": {"code": 400, "message": message, "type": "exceed_context_size_error"}}


def _vllm(prompt: int, reply: int, n_ctx: int) -> dict[str, Any]:
    message = (
        f"This model's maximum context length is {n_ctx} tokens. However, you requested "
        f"{prompt + reply} tokens ({prompt} in the messages, {reply} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    return {"object": "error", "message": message, "type": "BadRequestError", "code": 400}


def _openai(prompt: int, reply: int, n_ctx: int) -> dict[str, Any]:
    message = (
        f"This model's maximum context length is {n_ctx} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return {"error": {**error, "code": "context_length_exceeded"}}


Refusal = Callable[[int, int, int], dict[str, Any]]
# name -> (error body, whether the reply reservation counts against the window: vLLM and
# OpenAI check prompt + max_tokens, llama.cpp only the prompt)
REFUSALS: dict[str, tuple[Refusal, bool]] = {
    "llama.cpp": (_llama, False),
    "llama.cpp-old": (_llama_old, False),
    "vllm": (_vllm, True),
    "openai": (_openai, True),
}


@dataclass
class Seen:
    prompt_tokens: int
    max_tokens: int
    accepted: bool
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class WindowedServer:
    n_ctx: int = 1_000_000
    shape: str = "llama.cpp"
    # Server tokens per token of ours: its tokenizer and chat template are not ours.
    factor: float = 1.0
    # GET /props advertises n_ctx (llama.cpp); otherwise it answers 404 (vLLM, OpenAI).
    props: bool = False
    # The GET /v1/models body; None: 404.
    models: dict[str, Any] | None = None
    queued: list[dict[str, Any]] = field(default_factory=list)
    reply: dict[str, Any] = field(
        default_factory=lambda: completion({"role": "assistant", "content": "done"}, "stop")
    )
    seen: list[Seen] = field(default_factory=list)
    discovery_requests: list[str] = field(default_factory=list)
    url: str = ""

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        n = count_tokens(json.dumps(body.get("tools", [])))
        for m in body["messages"]:
            n += 4 + count_tokens(m.get("content") or "")
            n += sum(count_tokens(json.dumps(c)) for c in m.get("tool_calls", []))
        return int(n * self.factor)

    @property
    def refused(self) -> list[Seen]:
        return [s for s in self.seen if not s.accepted]

    @property
    def accepted(self) -> list[Seen]:
        return [s for s in self.seen if s.accepted]

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt = self.prompt_tokens(body)
        reply = int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
        refusal, counts_reply = REFUSALS[self.shape]
        fits = prompt + (reply if counts_reply else 0) <= self.n_ctx
        self.seen.append(Seen(prompt, reply, fits, body, dict(request.headers)))
        if not fits:
            return web.json_response(refusal(prompt, reply, self.n_ctx), status=400)
        return await answer(request, body, self.queued.pop(0) if self.queued else self.reply)

    async def get_props(self, request: web.Request) -> web.Response:
        self.discovery_requests.append(request.path)
        if not self.props:
            return web.json_response({"error": "not found"}, status=404)
        settings = {"n_ctx": self.n_ctx, "params": {"n_predict": -1}}
        return web.json_response({"default_generation_settings": settings, "total_slots": 1})

    async def get_models(self, request: web.Request) -> web.Response:
        self.discovery_requests.append(request.path)
        if self.models is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(self.models)


@pytest.fixture(name="windowed")
async def windowed_server() -> AsyncIterator[WindowedServer]:
    """A running WindowedServer; a test module imports this to have the `windowed` fixture."""
    fake = WindowedServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.chat)
    app.router.add_get("/props", fake.get_props)
    app.router.add_get("/v1/models", fake.get_models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    yield fake
    await runner.cleanup()
