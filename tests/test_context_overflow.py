"""The whole loop against a model server whose context window is smaller than our budget:
an overflow is answered with a smaller request, not a failed task; the window is learned
from the error or asked of the server up front; only a request that cannot shrink enough
fails, saying why, with everything committed kept."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.compaction import CompactionActivities
from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context.model_context import config_of
from durable_agents.activities.context_windows import MAX_OVERFLOW_RETRIES
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workers.client.session_view import load_view, render_view
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import CompactInput
from tests.conftest import AgentRunner
from tests.support.fake_openai import completion, tool_call_reply
from tests.support.fake_window import (
    WindowedServer,
    windowed_server,  # noqa: F401 (the `windowed` fixture)
)
from tests.support.helpers import items_of, session_root, start

WINDOW = 4_096
# ~17k tokens: expanded, the result alone would fill the default 6,000-token allowance.
READ_ONLY = ToolRegistry.of(builtin_tools("read_file"))
BIG_FILE = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1500))


@pytest.fixture
async def provider(windowed: WindowedServer) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider(base_url=windowed.url, api_key=None, model="gpt-x", timeout=10)
    yield p
    await p.aclose()


async def run_survey(
    windowed: WindowedServer,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> tuple[str, list[ItemRow], str]:
    """Three steps: read the big file, read it again, answer. Returns (status, items, what
    `agentctl show` prints). The agent has read_file alone: the windows here are sized to
    its fixed part (system prompt, task, one tool's schema), which the built-in tools'
    schemas would outgrow as tools are added."""
    windowed.queued = [
        tool_call_reply('{"path": "big.txt"}'),
        tool_call_reply('{"path": "big.txt"}', ids=("call_9",)),
    ]
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "big.txt").write_text(BIG_FILE)
    async with agent_worker(provider, workspace, registry=READ_ONLY) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 90)
    view = await load_view(resources.sessions, tenant, sid)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render_view(view))
    return result.status, await items_of(resources, tenant, session_id), console.export_text()


def windows_of(items: list[ItemRow]) -> list[dict[str, Any] | None]:
    """The window each reply recorded; None where it was just the configured budget."""
    return [i.data["context"].get("window") for i in items if i.kind == "assistant_message"]


@pytest.mark.parametrize("shape", ["llama.cpp", "vllm", "openai"])
async def test_an_overflow_is_retried_smaller_and_the_window_is_learned(
    shape: str,
    windowed: WindowedServer,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    """The server counts 1.2 of its tokens per one of ours; its error names the window and
    the prompt's size, so one smaller request fits, and every later step fits at once."""
    windowed.n_ctx, windowed.shape, windowed.factor = WINDOW, shape, 1.2
    status, items, shown = await run_survey(
        windowed, provider, agent_worker, client, resources, workspace, tenant
    )

    assert status == "completed"
    assert [s.accepted for s in windowed.seen] == [True, False, True, True]
    refused, retried = windowed.seen[1], windowed.seen[2]
    assert retried.prompt_tokens < refused.prompt_tokens
    # The reply reservation shrank to a quarter of the window as well.
    assert retried.max_tokens == WINDOW // 4 < refused.max_tokens
    # A smaller request is a new request to a vendor that dedupes by key.
    key = refused.headers["idempotency-key"]
    assert retried.headers["idempotency-key"] == f"{key}:fit1"
    # The retry still carries the newest result, as an excerpt.
    assert "line 0: the quick brown fox" in retried.body["messages"][-1]["content"]
    first, second, third = windows_of(items)
    assert first is None  # the configured budget, as the turn's context config records it
    assert second is not None and third is not None
    assert second["server_tokens"] == WINDOW and second["source"] == "overflow"
    assert second["overflow_retries"] == 1 and third["overflow_retries"] == 0
    assert second["budget_tokens"] < ContextBudget().context_tokens
    assert f"model server window: {WINDOW} tokens (from overflow)" in shown


async def test_an_overflow_without_numbers_shrinks_step_by_step(
    windowed: WindowedServer,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    """Older llama.cpp builds say only that the request exceeds the context size."""
    windowed.n_ctx, windowed.shape = WINDOW, "llama.cpp-old"
    status, items, shown = await run_survey(
        windowed, provider, agent_worker, client, resources, workspace, tenant
    )

    assert status == "completed"
    sizes = [s.prompt_tokens for s in windowed.seen[1:] if s.accepted is False]
    assert 1 <= len(sizes) <= MAX_OVERFLOW_RETRIES
    assert sizes == sorted(sizes, reverse=True)  # each attempt smaller than the last
    assert windowed.seen[-1].accepted and windowed.seen[-2].accepted  # the last step fit at once
    second = windows_of(items)[1]
    assert (
        second is not None
        and second["overflow_retries"] == len(sizes)
        and second["server_tokens"] is None
    )
    assert "model server window: size not stated (from overflow)" in shown


async def test_an_overflow_that_outlasts_the_retries_of_one_attempt_is_retried(
    windowed: WindowedServer,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    """A window far below the budget, and no numbers to learn it from: one attempt's retries
    do not shrink the request enough, so the activity fails retryably and its next attempt
    starts from what the worker learned, instead of failing the task."""
    # Room for the fixed part (system prompt, task, tool schemas) and little more.
    windowed.n_ctx, windowed.shape = 1_400, "llama.cpp-old"
    status, items, _ = await run_survey(
        windowed, provider, agent_worker, client, resources, workspace, tenant
    )

    assert status == "completed"
    sizes = [s.prompt_tokens for s in windowed.refused]
    assert len(sizes) == MAX_OVERFLOW_RETRIES + 1  # all one attempt may send
    assert sizes == sorted(sizes, reverse=True)
    assert windowed.seen[len(sizes) + 1].prompt_tokens < sizes[-1]
    # The attempt that succeeded started from the learned size: it needed no retry.
    assert windows_of(items)[1]["overflow_retries"] == 0


@pytest.mark.parametrize("advertised", ["props", "models"])
async def test_a_window_the_server_advertises_is_used_from_the_first_request(
    advertised: str,
    windowed: WindowedServer,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    """llama.cpp's GET /props or vLLM's max_model_len: no request overflows, and the
    server is asked once per worker, not once per step."""
    windowed.n_ctx, windowed.shape = WINDOW, "llama.cpp" if advertised == "props" else "vllm"
    if advertised == "props":
        windowed.props = True
    else:
        entry = {"id": "gpt-x", "object": "model", "owned_by": "vllm", "max_model_len": WINDOW}
        windowed.models = {"object": "list", "data": [entry]}
    status, items, shown = await run_survey(
        windowed, provider, agent_worker, client, resources, workspace, tenant
    )

    assert status == "completed"
    assert [s.accepted for s in windowed.seen] == [True, True, True]
    assert all(s.max_tokens == WINDOW // 4 for s in windowed.seen)
    expected = ["/props"] if advertised == "props" else ["/props", "/v1/models"]
    assert windowed.discovery_requests == expected
    assert {w["source"] for w in windows_of(items)} == {advertised}
    assert {w["server_tokens"] for w in windows_of(items)} == {WINDOW}
    assert f"model server window: {WINDOW} tokens (from {advertised})" in shown


async def test_a_newest_item_that_cannot_fit_fails_the_task_saying_so(
    windowed: WindowedServer,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    """A tool call whose arguments alone outgrow the window: the newest item is never cut,
    so the step fails for good, with the window and the need in plain words, and every
    item committed before it is still there."""
    windowed.n_ctx = WINDOW
    note = "word " * 5_000  # ~5,000 tokens of arguments, re-sent with the call every step
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "a.txt", "n": note})},
    }
    windowed.queued = [
        completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
    ]
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text("small file")
    async with agent_worker(provider, workspace, registry=READ_ONLY) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 90)
        items = await items_of(resources, tenant, session_id)

    assert 1 <= len(windowed.refused) <= MAX_OVERFLOW_RETRIES + 1
    assert windowed.seen[0].accepted
    kinds = [i.kind for i in items]
    assert kinds == ["user_message", "assistant_message", "tool_call", "tool_result", "error"]
    error = items[-1].text
    assert "context window too small" in error
    assert f"window ({WINDOW} tokens)" in error
    assert "the system prompt, the task and the newest item" in error
    needed = int(error.split("need about ")[1].split(" tokens")[0])
    assert needed > WINDOW


async def test_the_newest_call_is_sent_even_when_it_outgrows_half_the_budget(
    windowed: WindowedServer,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    """The item window read from AgentState stops at half the budget; a tool call larger
    than that used to leave only its result in the window, and assembly then dropped the
    whole newest step: the model was asked again as if it had done nothing."""
    note = "word " * 3_000
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "a.txt", "n": note})},
    }
    windowed.queued = [
        completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
    ]
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text("small file")
    async with agent_worker(provider, workspace, context_tokens=5_000) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    second = windowed.seen[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["function"]["name"] == "read_file"


async def test_a_summary_that_overflows_is_retried_within_the_learned_window(
    windowed: WindowedServer, provider: OpenAICompatibleProvider, resources: Resources, tenant: str
) -> None:
    """compact_session on a worker that has not met the server yet: its overflow is
    retryable, and the retry (Temporal's next attempt) asks for a summary that fits."""
    windowed.n_ctx, windowed.shape = 2_048, "vllm"
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        items = ItemRepository(db, tenant)
        for n in range(40):
            text = f"message {n} " + "y " * 400
            key, tokens = f"{sid}:{n}", count_tokens(text)
            await items.append(NewItem(sid, "user_message", "user", key, text=text, tokens=tokens))
    current = config_of("openai", "gpt-x", "p", [], ContextBudget(context_tokens=32_000))
    acts = CompactionActivities(resources.sessions, provider, current)
    inp = CompactInput(str(sid), tenant, 7, f"{sid}:7:compact")

    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(acts.compact_session, inp)
    assert caught.value.type == "ContextOverflow" and not caught.value.non_retryable
    ref = await ActivityEnvironment().run(acts.compact_session, inp)

    assert ref is not None and ref.version == 1
    assert [s.accepted for s in windowed.seen] == [False, True]
    fitted = windowed.seen[1]
    assert fitted.prompt_tokens + fitted.max_tokens <= windowed.n_ctx
