"""Failures carry our words: an unexpected exception whose message quotes content (a page,
a reply, a statement's parameters) reaches Temporal as its class name only, still retried;
a provider's own error (Temporal-free) reaches it with its type, words and retry advice."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from durable_agents.activities.failure_words import FailureWords
from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.errors import MODEL_REQUEST_REJECTED, rejected_request
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import start

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


class Refusing:
    """A provider whose vendor refuses the request: the domain error the providers raise."""

    name = "refusing"

    async def complete(self, request: ModelRequest) -> ModelReply:
        raise rejected_request(self.name, "the vendor refused the tool schema")

    async def aclose(self) -> None:
        return None


async def test_a_providers_error_reaches_temporal_with_its_type_and_retry_advice(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(Refusing(), workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant)
        with pytest.raises(WorkflowFailureError) as failed:
            async with asyncio.timeout(60):
                await handle.result()
    chain: list[BaseException] = []
    cause: BaseException | None = failed.value
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__
    # The loop's ModelFailed, caused by the activity's failure, caused by the provider's.
    activity_failure = [e for e in chain if isinstance(e, ApplicationError)][-1]
    assert activity_failure.type == MODEL_REQUEST_REJECTED and activity_failure.non_retryable
    assert "refused the tool schema" in activity_failure.message


class _Raises(ActivityInboundInterceptor):
    def __init__(self, err: Exception) -> None:
        self.err = err

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        raise self.err


async def test_the_edge_turns_a_provider_error_into_temporals_once() -> None:
    delay = timedelta(seconds=7)
    err = ProviderError(
        "m returned HTTP 429", {"n": 1}, type="ModelUnavailable", next_retry_delay=delay
    )
    inbound = FailureWords().intercept_activity(_Raises(err))
    with pytest.raises(ApplicationError) as raised:
        await inbound.execute_activity(cast(ExecuteActivityInput, None))
    got = raised.value
    assert (got.type, got.message, got.non_retryable) == ("ModelUnavailable", err.message, False)
    assert got.next_retry_delay == delay and list(got.details) == [{"n": 1}]
    assert got.__cause__ is None  # nothing of the domain exception is chained into history
