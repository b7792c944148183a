"""call_model and run_tool are scheduled without a non_retryable_error_types list (~115 B of
every one of their ActivityTaskScheduled events): safe only because each raises the
business errors retrying cannot fix as non-retryable ApplicationErrors itself."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.model_call import ModelActivities
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ModelCallInput, ToolRunInput
from durable_agents.workflows.policies import NON_RETRYABLE_ERROR_TYPES, STATE_WRITE_RETRY
from tests.conftest import AgentRunner
from tests.support.helpers import session_root, start
from tests.support.tool_calls import new_call


async def test_run_tool_fails_a_missing_session_or_call_non_retryably_by_itself(
    resources: Resources, workspace: Path, tenant: str
) -> None:
    acts = ToolActivities(
        resources.sessions, resources.store, default_registry(), workspace=workspace
    )
    missing = ToolRunInput(str(uuid.uuid4()), tenant, 0, "call_0_0", "read_file", "k-missing")
    with pytest.raises(ApplicationError) as err:
        await ActivityEnvironment().run(acts.run_tool, missing)
    # The session is read first (its row then answers the call's lineage).
    assert (err.value.type, err.value.non_retryable) == ("SessionNotFound", True)

    call = await new_call(resources, tenant, "read_file", {"path": "a.txt"})
    other = ToolRunInput(call.session_id, tenant, 0, "call_9_9", "read_file", "k-other")
    with pytest.raises(ApplicationError) as err:
        await ActivityEnvironment().run(acts.run_tool, other)
    assert (err.value.type, err.value.non_retryable) == ("ToolCallNotFound", True)


async def test_call_model_fails_a_missing_session_non_retryably_by_itself(
    resources: Resources, tenant: str
) -> None:
    acts = ModelActivities(
        resources.sessions,
        resources.store,
        ScriptedProvider.from_data([]),
        default_registry(),
        model="scripted",
        system_prompt="",
        budget=ContextBudget(),
    )
    sid = str(uuid.uuid4())
    with pytest.raises(ApplicationError) as err:
        await ActivityEnvironment().run(acts.call_model, ModelCallInput(sid, tenant, 0, f"{sid}:0"))
    assert (err.value.type, err.value.non_retryable) == ("SessionNotFound", True)
    assert err.value.type in NON_RETRYABLE_ERROR_TYPES  # the list the policy no longer carries


async def test_a_step_schedules_model_and_tool_calls_without_an_error_type_list(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text("a\n")
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        await handle.result()
    policies = {
        e.activity_task_scheduled_event_attributes.activity_type.name: (
            e.activity_task_scheduled_event_attributes.retry_policy
        )
        for e in (await handle.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    assert list(policies["call_model"].non_retryable_error_types) == []
    assert list(policies["run_tool"].non_retryable_error_types) == []
    # The state writes keep theirs (open_session stages its text outside the wrapper); status
    # writes run as local activities (no scheduled event) with that same policy.
    assert "set_session_status" not in policies
    assert STATE_WRITE_RETRY.non_retryable_error_types == NON_RETRYABLE_ERROR_TYPES
