"""A cancel during a model call stops the model: the activity's HTTP request to
the model server is closed at once, so llama-server stops generating for a task nobody
waits for, and the worker says so in one line, no traceback (a cancel is not a failure)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Literal

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import DEV_HEARTBEAT_THROTTLE_SECONDS
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.gateway import poll
from tests.support.helpers import start
from tests.support.slow_model import slow_model


@pytest.mark.parametrize("how", ["temporal", "update"])
async def test_a_cancel_closes_the_model_request_and_logs_one_line(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    caplog: pytest.LogCaptureFixture,
    how: Literal["temporal", "update"],
) -> None:
    caplog.set_level(logging.INFO)
    async with slow_model() as (model, url):
        provider = OpenAICompatibleProvider(url, None, "slow", 60.0, tool_mode="native")
        try:
            throttle = {"heartbeat_throttle_seconds": DEV_HEARTBEAT_THROTTLE_SECONDS}
            async with agent_worker(provider, workspace, agent_settings=throttle) as queue:
                session_id, handle = await start(client, resources, queue, tenant=tenant)

                async def status() -> str:
                    row, _ = await tasks.read_session(resources.sessions, tenant, session_id)
                    return row.status

                await asyncio.wait_for(model.generating.wait(), 30)
                # Past the activity's first heartbeat: from then on the throttle holds them.
                await asyncio.sleep(3)
                caplog.clear()
                cancelled_at = time.monotonic()
                if how == "update":
                    await verbs.cancel(client, resources.sessions, tenant, session_id)
                else:
                    await handle.cancel()
                await asyncio.wait_for(model.closed.wait(), 30)
                # The model server saw its client go within a second of the cancel.
                assert model.closed_at[0] - cancelled_at < 1.0
                await poll(status, lambda s: s == "cancelled", within_seconds=30)
                await asyncio.sleep(1)  # the activity's completion, and what it logs
        finally:
            await provider.aclose()
    ours = [r for r in caplog.records if r.name.startswith(("temporalio", "durable_agents"))]
    shown = "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in ours)
    assert not [r for r in ours if r.exc_info or r.exc_text], shown
    assert not [r for r in ours if r.levelno >= logging.WARNING], shown
    said = [r for r in ours if "call_model" in r.getMessage() and "cancel" in r.getMessage()]
    assert len(said) == 1, shown
    assert "\n" not in said[0].getMessage()
    assert said[0].levelno == logging.INFO
