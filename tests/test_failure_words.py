"""Failures carry our words: an unexpected exception whose message quotes content (a page,
a reply, a statement's parameters) reaches Temporal as its class name only, still retried."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.client import Client

from activities.providers.base import ModelReply, ModelRequest
from tests.conftest import AgentRunner
from tests.support.helpers import start
from workers.resources import Resources

SECRET = "secret-marker: the page said the launch code is 0000"


class Exploding:
    """A provider outside the system failing in a way our code does not expect."""

    name = "exploding"

    async def complete(self, request: ModelRequest) -> ModelReply:
        raise RuntimeError(SECRET)

    async def aclose(self) -> None:
        return None


async def test_an_unexpected_error_reaches_temporal_as_its_type_only(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(Exploding(), workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant)
        async with asyncio.timeout(60):
            while True:
                described = await handle.describe()
                pending = described.raw_description.pending_activities
                if pending and pending[0].attempt >= 2 and pending[0].HasField("last_failure"):
                    break
                await asyncio.sleep(0.2)
        await handle.terminate()
    failure = pending[0].last_failure
    assert failure.message == "RuntimeError in call_model"
    assert failure.application_failure_info.type == "RuntimeError"
    assert not failure.application_failure_info.non_retryable
    assert "secret-marker" not in str(failure)
