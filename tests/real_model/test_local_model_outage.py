"""The model server dies for three minutes mid-task; the task finishes after it returns."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.base import ModelProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.client.watch.follow import watch_items
from durable_agents.workers.client.watch.wait_status import wait_line
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack.llama import LlamaServer
from tests.conftest import AgentRunner
from tests.real_model.test_local_model_tasks import (
    FACT,
    TASK_SECONDS,
    _budget,
    _final_answer,
    start_answer_task,
)
from tests.support.helpers import items_of, run_approving

pytestmark = pytest.mark.real_model

OUTAGE_SECONDS = 180


async def test_the_task_outlasts_a_three_minute_model_outage(
    llama: LlamaServer,
    local_provider: ModelProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    async with agent_worker(local_provider, workspace, **_budget(llama)) as queue:
        sid, handle = await start_answer_task(client, resources, queue, workspace, tenant)
        # Mid-task: after the first model step is committed, before the answer.
        first_call = None
        async with asyncio.timeout(TASK_SECONDS):
            async for item in watch_items(resources.sessions, tenant, sid):
                if item.kind == "tool_call":
                    first_call = item
                    break
        assert first_call is not None, "the task ended before it called a tool"
        await asyncio.to_thread(llama.stop)
        down_at = time.monotonic()
        try:
            await asyncio.sleep(OUTAGE_SECONDS)
            # What any device sees meanwhile: waiting on the model, with the error and attempt.
            row, _ = await tasks.read_session(resources.sessions, tenant, sid, limit=1)
        finally:
            # The server is shared with the other real-model tests.
            await asyncio.to_thread(llama.start)
        outage = time.monotonic() - down_at
        assert row.status == "waiting_model", row.status
        line = wait_line(row)
        assert line is not None and "could not be reached" in line, line
        result, _ = await run_approving(
            client, resources, sid, handle, tenant, within_seconds=TASK_SECONDS
        )
    assert outage >= OUTAGE_SECONDS
    assert result.status == "completed"
    assert FACT in _final_answer(await items_of(resources, tenant, sid))
