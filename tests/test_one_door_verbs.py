"""One door for every verb, not only start: agentctl, the gateway, the Python API and a raw
Temporal update refuse the same bad approve, reject and budget raise in the same words
(workers/client/service.py over activities/policies/task_rules.py), and a refused request
leaves nothing behind: no item, no staged request, no raise."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agents import connect
from durable_agents.activities.policies.edited_arguments import InvalidEdit
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.decision_requests import DecisionRequestRow
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.contracts import RaiseBudgetResult
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key
from tests.support.helpers import agentctl, start, wait_for_pending

WRITE = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "A"}}]}]
# (the CLI's --tokens, the JSON value the gateway, the API and a raw update send, the words)
BAD_FIGURES: list[tuple[str, Any, str]] = [
    ("true", True, "tokens must be a whole number"),
    ("100.5", "100", "tokens must be a whole number"),
    ("0", 0, "tokens must be >= 1"),
]


async def _records(res: Resources, tenant: str, sid: str) -> tuple[int, int]:
    """Approval items of the session, and requests staged for it."""
    async with res.sessions() as db:
        items = await db.scalar(
            select(func.count()).where(
                ItemRow.tenant_id == tenant,
                ItemRow.session_id == uuid.UUID(sid),
                ItemRow.kind == ItemKind.APPROVAL,
            )
        )
        staged = await db.scalar(
            select(func.count()).where(
                DecisionRequestRow.tenant_id == tenant,
                DecisionRequestRow.session_id == uuid.UUID(sid),
            )
        )
    return int(items or 0), int(staged or 0)


@pytest.mark.parametrize(("typed", "sent", "words"), BAD_FIGURES)
async def test_every_door_refuses_the_same_bad_raise_in_the_same_words_and_records_nothing(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    typed: str,
    sent: Any,
    words: str,
) -> None:
    key = await make_key(resources, tenant, "approve", "read")
    async with (
        agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        sid, handle = await start(client, resources, queue, tenant=tenant)
        await wait_for_pending(client, sid)

        code, _, err = await agentctl(capsys, "budget", "raise", sid, "--tokens", typed)
        assert code == 1 and words in err, err

        answer = await http.post(
            f"/v1/sessions/{sid}/budget", json={"tokens": sent}, headers=bearer(key)
        )
        assert answer.status_code == 400, answer.text
        assert words in answer.json()["error"]["message"]

        async with connect(tenant_id=tenant, settings=get_settings()) as api:
            with pytest.raises(ValueError, match=words):
                await api.task(sid).raise_budget(tokens=sent)

        raw = {"tenant_id": tenant, "tokens": sent, "decided_by": "mallory"}
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("raise_budget", raw, result_type=RaiseBudgetResult)
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidTaskInput"
        assert words in cause.message
        await handle.cancel()
    assert await _records(resources, tenant, sid) == (0, 0)


async def test_a_refused_decision_leaves_no_item_and_no_staged_request_at_any_door(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = await make_key(resources, tenant, "approve", "read")
    async with (
        agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        sid, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, sid)

        # A call that does not exist, with a reason (which would be staged) and edits.
        code, _, err = await agentctl(capsys, "reject", sid, "call_9_9", "--reason", "nope")
        assert code == 1 and "call_9_9" in err, err
        code, _, err = await agentctl(capsys, "approve", sid, "call_9_9", "--edit", "{}")
        assert code == 1 and "call_9_9" in err, err
        answer = await http.post(
            f"/v1/sessions/{sid}/calls/call_9_9/reject", json={"reason": "no"}, headers=bearer(key)
        )
        assert answer.status_code == 409, answer.text
        async with connect(tenant_id=tenant, settings=get_settings()) as api:
            with pytest.raises(WorkflowUpdateFailedError):
                await api.task(sid).reject("call_9_9", "no")

            # Edits the tool's schema refuses: the same words at every door, nothing staged.
            bad = {"path": "a.md", "content": "A", "mode": "x"}
            with pytest.raises(InvalidEdit) as refused:
                await api.task(sid).approve(call, arguments=bad)
        words = str(refused.value)
        assert "'mode' is not an argument of this tool" in words
        code, _, err = await agentctl(
            capsys, "approve", sid, call, "--edit", '{"path": "a.md", "content": "A", "mode": "x"}'
        )
        assert code == 1 and words in err, err
        answer = await http.post(
            f"/v1/sessions/{sid}/calls/{call}/approve",
            json={"arguments": bad},
            headers=bearer(key),
        )
        assert answer.status_code == 422 and answer.json()["error"]["message"] == words
        assert await _records(resources, tenant, sid) == (0, 0)

        # The decision itself goes through, and the task ends.
        async with connect(tenant_id=tenant, settings=get_settings()) as api:
            await api.task(sid).approve(call)
        assert (await handle.result()).status == "completed"

        # Refused on the ended task, at each door: nothing recorded either.
        code, _, err = await agentctl(capsys, "reject", sid, call, "--reason", "late")
        assert code == 1, err
        answer = await http.post(
            f"/v1/sessions/{sid}/calls/{call}/reject", json={"reason": "late"}, headers=bearer(key)
        )
        assert answer.status_code == 409, answer.text
    assert await _records(resources, tenant, sid) == (1, 0)  # the approval the loop recorded


async def test_a_nul_in_any_query_parameter_is_a_400(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read")
    async with gateway_http(migrated, resources, client) as http:
        for url in ("/v1/usage?agent=%00", "/v1/sessions?status=%00x", "/v1/usage?group=a%00"):
            answer = await http.get(url, headers=bearer(key))
            assert answer.status_code == 400, (url, answer.text)
            assert "NUL" in answer.json()["error"]["message"]
