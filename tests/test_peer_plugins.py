"""Agents already written for the OpenAI Agents SDK and for pydantic-ai, on the real Temporal
dev server with their SDK's own plugin plus ours (one more entry in `plugins=[...]`, no agent
code changed), against a Chat Completions server: 30 model calls, each tool result 20 KB.

With the claim check the history holds references, the conversation each model call sends
again is stored once (stored bytes about N·R, not N²·R/2), every reference in the history
names an object that exists and is held for the workflow."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

# The `peers` extra (pyproject.toml): the SDKs whose agents these are.
pytest.importorskip("pydantic_ai.durable_exec.temporal")
pytest.importorskip("temporalio.openai_agents")

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.worker import Worker

from durable_agents import ClaimCheckPlugin
from durable_agents.storage.claim_holds import holds_of
from durable_agents.workers.peers.claim_check import ClaimCheckStore
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support import peer_openai_agent, peer_pydantic_agent, peer_workload
from tests.support.helpers import s3_keys
from tests.support.peer_agents import ToolLoopModel, serving

CALLS, RESULT_BYTES = 30, 20_000


def openai_plugin(url: str) -> OpenAIAgentsPlugin:
    from datetime import timedelta

    from agents.models.openai_provider import OpenAIProvider

    provider = OpenAIProvider(openai_client=peer_workload.chat_client(url), use_responses=False)
    params = ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60))
    return OpenAIAgentsPlugin(model_params=params, model_provider=provider)


@asynccontextmanager
async def peer_worker(
    sdk: str, stack: StackEndpoints, resources: Resources, tenant: str, url: str, with_ours: bool
) -> AsyncIterator[tuple[Client, str, type]]:
    plugins: list[Any]
    if sdk == "openai-agents":
        plugins, workflow, activities = (
            [openai_plugin(url)],
            peer_openai_agent.OpenAIAgentWorkflow,
            [peer_openai_agent.read_result],
        )
    else:
        peer_pydantic_agent.CHAT_CLIENT.base_url = url
        plugins, workflow, activities = (
            [PydanticAIPlugin()],
            peer_pydantic_agent.PydanticAgentWorkflow,
            [],
        )
    if with_ours:
        # docs/other-sdks.md's one-line change; the test hands it the stack's store and database.
        plugins.append(
            ClaimCheckPlugin(tenant, store=ClaimCheckStore(resources.store, resources.sessions))
        )
    client = await Client.connect(stack.temporal_address, namespace="default", plugins=plugins)
    queue = f"peer-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[workflow],
        activities=activities,
        # OpenAI Agents: every activation replays the history, so references decode on
        # replay. pydantic-ai stamps each message with the wall clock in workflow code, so a
        # replay re-encodes the conversation with new timestamps (new groups, never written
        # to history): replaying every activation stored 1.31 x N·R here, 0.83 cached. Its
        # replay is exercised by tests/test_peer_plugin_sigkill.py.
        max_cached_workflows=0 if sdk == "openai-agents" else 100,
    ):
        yield client, queue, workflow


async def history_bytes(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return History(events=history.events).ByteSize()


async def stored_bytes(resources: Resources, tenant: str) -> int:
    prefix = f"{resources.store.prefix}/{tenant}/"
    total = 0
    paginator = resources.store.client.get_paginator("list_objects_v2")
    async for page in paginator.paginate(Bucket=resources.store.bucket, Prefix=prefix):
        total += sum(int(o["Size"]) for o in page.get("Contents", []))
    return total


@pytest.mark.parametrize("sdk", ["openai-agents", "pydantic-ai"])
async def test_peer_agent_with_our_plugin_keeps_history_small_and_stores_each_result_once(
    sdk: str, stack: StackEndpoints, migrated: StackEndpoints, resources: Resources, tenant: str
) -> None:
    model = ToolLoopModel(CALLS, RESULT_BYTES)
    workflow_id = f"peer-{sdk}-{uuid.uuid4().hex[:8]}"
    async with (
        serving(model),
        peer_worker(sdk, stack, resources, tenant, model.url, True) as (
            client,
            queue,
            workflow,
        ),
    ):
        answer = await client.execute_workflow(
            workflow.run, "read them all", id=workflow_id, task_queue=queue
        )
        assert answer == f"read {CALLS - 1} results"
        assert model.requests >= CALLS
        # Each model call sent the whole conversation (~N·R/2 on average) to the model...
        assert max(model.request_bytes) > (CALLS - 1) * RESULT_BYTES
        # ...but the history keeps references: naive, it would hold ~N²·R/2 (8.7 MB here).
        size = await history_bytes(client, workflow_id)
        assert size < 400_000, f"history {size} bytes"

    n_r = CALLS * RESULT_BYTES
    stored = await stored_bytes(resources, tenant)
    assert 0 < stored <= 1.2 * n_r, f"stored {stored} bytes for N·R = {n_r}"
    keys = await s3_keys(resources, f"{resources.store.prefix}/{tenant}/")
    async with resources.sessions() as db:
        held = await holds_of(db, tenant, f"default/{workflow_id}")
    assert len(held) == len(keys)  # every object it wrote is held for this workflow
    assert all(h.expires_at is None for h in held)


@pytest.mark.parametrize("sdk", ["openai-agents"])
async def test_without_our_plugin_history_grows_with_every_result(
    sdk: str, stack: StackEndpoints, migrated: StackEndpoints, resources: Resources, tenant: str
) -> None:
    """The baseline the plugin changes: the same agent, 10 calls, without it."""
    model = ToolLoopModel(10, RESULT_BYTES)
    workflow_id = f"peer-bare-{uuid.uuid4().hex[:8]}"
    async with (
        serving(model),
        peer_worker(sdk, stack, resources, tenant, model.url, False) as (
            client,
            queue,
            workflow,
        ),
    ):
        await client.execute_workflow(workflow.run, "read", id=workflow_id, task_queue=queue)
        assert await history_bytes(client, workflow_id) > 9 * 8 * RESULT_BYTES // 2
