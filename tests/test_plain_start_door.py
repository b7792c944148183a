"""A plain Temporal start is a door like the others: it gets its agent's Limits and its
tenant's default budget, its input decodes as its type says (no coercion, no stuck workflow
task), and a field no door takes (the older approval_overrides) is refused, not dropped."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agents.activities.agents import Agent, Limits
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.models import SessionRow
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.tasks import live_status
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import BudgetDefaults
from durable_agents.workflows.contracts import AgentInput, AgentResult
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support.helpers import session_root
from tests.support.plain_inputs import plain_input
from tests.support.runaway import SlowRunaway
from tests.test_quotas import _until

CAPPED = Agent("capped", "Read a.txt again and again.", limits=Limits(budget_tokens=250))


async def _plain_start(client: Client, queue: str, fields: dict[str, Any]) -> Any:
    sid = str(uuid.uuid4())
    return sid, await client.start_workflow(
        "AgentWorkflow",
        {"session_id": sid, "task_text": "read a.txt", **fields},
        id=workflow_id_for(sid),
        task_queue=queue,
        result_type=AgentResult,
    )


@pytest.mark.parametrize(
    ("fields", "budget"),
    [
        ({"agent": "capped"}, {}),  # the agent's Limits
        ({}, {"*": BudgetDefaults(tokens=250)}),  # the tenant's default budget
    ],
)
async def test_a_plain_start_runs_under_its_agents_limits_and_its_tenants_default_budget(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    fields: dict[str, Any],
    budget: dict[str, BudgetDefaults],
) -> None:
    model = SlowRunaway(delay=0.01)
    async with agent_worker(
        model, workspace, agents=(CAPPED,), agent_settings={"tenant_budgets": budget}
    ) as queue:
        sid, handle = await _plain_start(client, queue, {"tenant_id": tenant, **fields})
        session_root(workspace, tenant, sid).joinpath("a.txt").write_text("alpha")
        await _until(resources, tenant, sid, SessionStatus.BUDGET_EXHAUSTED)
        live = await live_status(client, sid)
        assert live.last_error == "budget reached: tokens 330 of 250"
        assert len(model.keys) == 3
        await handle.cancel()


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"settings": {"max_steps": True}}, "settings.max_steps must be a whole number, got bool"),
        ({"settings": {"max_steps": 2.5}}, "settings.max_steps must be a whole number, got float"),
        ({"settings": {"max_steps": "100"}}, "settings.max_steps must be a whole number, got str"),
        ({"settings": {"max_steps": [1]}}, "settings.max_steps must be a whole number, got list"),
        (
            {"settings": {"budget_tokens": False}},
            "settings.budget_tokens must be a whole number, got bool",
        ),
        (
            {"settings": {"approval_timeout_seconds": "60"}},
            "settings.approval_timeout_seconds must be a number",
        ),
        ({"settings": [5]}, "settings must be a JSON object, got list"),
        # A setting beside the settings, not in them, is refused, never silently dropped.
        ({"max_steps": 5}, "max_steps is not a field of AgentInput"),
        (
            {"settings": {"approval_overrides": {"write_file": False}}},
            "approval_overrides is not a field of TaskSettings",
        ),
    ],
)
async def test_a_mistyped_plain_start_fails_at_once_with_nothing_committed(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    fields: dict[str, Any],
    words: str,
) -> None:
    async with agent_worker(ScriptedProvider.from_data([{"text": "done"}]), workspace) as queue:
        _, handle = await _plain_start(client, queue, {"tenant_id": tenant, **fields})
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)  # failed, never a stuck task
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidTaskInput"
    assert words in cause.message
    async with resources.sessions() as db:
        sessions = await db.scalar(select(func.count()).where(SessionRow.tenant_id == tenant))
    assert sessions == 0


def test_a_start_input_written_by_our_own_code_still_decodes() -> None:
    """The strict decoding takes every input a door of ours builds (and continue-as-new)."""
    from temporalio.api.common.v1 import Payload  # noqa: F401  (the SDK's payload type)
    from temporalio.converter import DataConverter

    from durable_agents.workflows.strict_inputs import StrictPayloadConverter

    strict = StrictPayloadConverter()
    inp = plain_input("s", "t", max_steps=5, budget_cost_usd=2, device_tools=["x"])
    payload = DataConverter.default.payload_converter.to_payloads([inp])
    assert strict.from_payloads(payload, [AgentInput]) == [inp]
