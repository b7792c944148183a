"""`agentctl usage` against what llama.cpp's server itself reported (issue 32): a recording
proxy between the worker and the server keeps the `usage` of every reply it relays, and the
task's usage as `agentctl usage --session` prints it must be their sum, to the token."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from temporalio.client import Client

from durable_agents.activities.providers.factory import build_provider
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack.llama import LlamaServer
from tests.conftest import AgentRunner
from tests.real_model.relay import relay, serving
from tests.real_model.test_local_model_tasks import (
    FACT,
    TASK_SECONDS,
    _budget,
    _final_answer,
    start_answer_task,
)
from tests.support.helpers import agentctl, items_of, run_approving

pytestmark = pytest.mark.real_model


class UsageRecorder:
    """Relays Chat Completions to the server unchanged (streamed as streamed) and keeps the
    `usage` object of each reply: the provider's own figures, read off the wire."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.usages: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        response, seen = await relay(request, self.upstream, await request.read())
        if response.status == 200:
            self._keep(seen)
        return response

    def _keep(self, seen: bytes) -> None:
        usage = None
        for line in seen.splitlines() or [seen]:
            line = line.strip().removeprefix(b"data:").strip()
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("usage"), dict):
                usage = value["usage"]
        assert usage is not None, "a reply without usage: the sum below would be short"
        self.usages.append(usage)

    def totals(self) -> tuple[int, int, int]:
        cached = sum(
            (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for u in self.usages
        )
        return (
            sum(u["prompt_tokens"] for u in self.usages),
            sum(u["completion_tokens"] for u in self.usages),
            cached,
        )


@pytest.fixture
async def recorder(llama: LlamaServer) -> AsyncIterator[UsageRecorder]:
    proxy = UsageRecorder(llama.base_url)
    async with serving(proxy.handle) as url:
        proxy.url = url
        yield proxy


async def test_agentctl_usage_is_the_sum_of_what_the_server_reported(
    llama: LlamaServer,
    recorder: UsageRecorder,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = llama.model_settings().model_copy(update={"base_url": recorder.url})
    provider = build_provider(settings)
    try:
        async with agent_worker(provider, workspace, **_budget(llama)) as queue:
            sid, handle = await start_answer_task(client, resources, queue, workspace, tenant)
            result, _ = await run_approving(
                client, resources, sid, handle, tenant, within_seconds=TASK_SECONDS
            )
    finally:
        await provider.aclose()
    assert result.status == "completed"
    assert FACT in _final_answer(await items_of(resources, tenant, sid))
    code, out, _ = await agentctl(capsys, "usage", "--session", sid)
    assert code == 0, out
    total = next(line for line in out.splitlines() if "total" in line)
    replies, tokens_in, tokens_out, cached = (int(n) for n in re.findall(r"\d+", total)[:4])
    reported_in, reported_out, reported_cached = recorder.totals()
    assert replies == len(recorder.usages) >= 2
    assert (tokens_in, tokens_out, cached) == (reported_in, reported_out, reported_cached), out
