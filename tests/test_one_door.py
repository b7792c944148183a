"""One door: agentctl, the gateway, the Python API and a plain Temporal start refuse the
same bad start with the same words (the command layer's rules, workers/client/commands.py and
activities/policies/task_rules.py), and nothing is committed for it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agents import connect
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.contracts import AgentInput, AgentResult
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key
from tests.support.helpers import agentctl, session_count
from tests.support.plain_inputs import plain_input

TOO_MANY = {f"tool_{n}": "always" for n in range(65)}

# (what the CLI is given, the gateway's JSON, the API's and plain start's fields, the words)
BAD_STARTS: list[tuple[list[str], dict[str, Any], dict[str, Any], str]] = [
    (["--max-steps", "0"], {"max_steps": 0}, {"max_steps": 0}, "max_steps must be >= 1"),
    (
        ["--max-steps", "1000000000"],
        {"max_steps": 10**9},
        {"max_steps": 10**9},
        "max_steps must be >= 1 and <= 10000, got 1000000000",
    ),
    (
        ["--policy", r"write_file=match:path:(a)\1"],
        {"approval_policies": {"write_file": r"match:path:(a)\1"}},
        {"approval_policies": {"write_file": r"match:path:(a)\1"}},
        "approval_policies: policy",
    ),
    (
        [arg for tool in TOO_MANY for arg in ("--policy", f"{tool}=always")],
        {"approval_policies": TOO_MANY},
        {"approval_policies": TOO_MANY},
        "approval_policies has 65 entries; at most 64 are allowed",
    ),
]


@pytest.mark.parametrize(("cli", "body", "fields", "words"), BAD_STARTS)
async def test_every_door_refuses_the_same_bad_start_with_the_same_words(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    cli: list[str],
    body: dict[str, Any],
    fields: dict[str, Any],
    words: str,
) -> None:
    key = await make_key(resources, tenant, "start", "read")
    async with (
        agent_worker(ScriptedProvider.from_data([{"text": "done"}]), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        code, _, err = await agentctl(capsys, "start", "a task", *cli)
        assert code == 1 and words in err, err

        answer = await http.post(
            "/v1/sessions", json={"text": "a task", **body}, headers=bearer(key)
        )
        assert answer.status_code == 400, answer.text
        assert words in answer.json()["error"]["message"]

        async with connect(tenant_id=tenant, settings=get_settings()) as api:
            with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
                await api.start("default", "a task", **fields)

        sid = str(uuid.uuid4())
        handle = await client.start_workflow(
            "AgentWorkflow",
            plain_input(sid, tenant, task_text="a task", **fields),
            id=f"agent-{sid}",
            task_queue=queue,
            result_type=AgentResult,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidTaskInput"
        assert words in cause.message

    assert await session_count(resources, tenant) == 0  # no door committed anything


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("text", "text contains a NUL character (U+0000) at offset 6"),
    ],
)
async def test_a_nul_in_the_task_text_is_refused_at_every_door_naming_the_field(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    where: str,
    words: str,
) -> None:
    text = "a task\x00 with a secret-marker"
    key = await make_key(resources, tenant, "start", "read")
    async with (
        agent_worker(ScriptedProvider.from_data([{"text": "done"}]), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        code, _, err = await agentctl(capsys, "start", text)
        assert code == 1 and words in err, err

        answer = await http.post("/v1/sessions", json={"text": text}, headers=bearer(key))
        assert answer.status_code == 400 and words in answer.json()["error"]["message"]

        async with connect(tenant_id=tenant, settings=get_settings()) as api:
            with pytest.raises(ValueError, match=r"text contains a NUL character"):
                await api.start("default", text)

        sid = str(uuid.uuid4())
        handle = await client.start_workflow(
            "AgentWorkflow",
            AgentInput(session_id=sid, tenant_id=tenant, task_text=text),
            id=f"agent-{sid}",
            task_queue=queue,
            result_type=AgentResult,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidTaskInput"
        assert "task_text contains a NUL character" in cause.message
        # The failure is in our words: the text is in the start event only, never repeated.
        history = await handle.fetch_history()
        mentions = [e for e in history.events if "secret-marker" in str(e)]
        assert len(mentions) <= 1, "the task text was repeated in history"
    assert await session_count(resources, tenant) == 0


async def test_the_tenant_is_bound_by_the_credential_at_the_python_api(
    migrated: StackEndpoints, cli_env: None, tenant: str
) -> None:
    async with connect(tenant_id=tenant, settings=get_settings()) as api:
        with pytest.raises(PermissionError, match="tenant_id comes from the credential"):
            await api.start("default", "a task", tenant_id="someone-else")
