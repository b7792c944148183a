"""Edited arguments are checked on the server against the tool's JSON schema as the call's
turn recorded it: the inbox shows that schema, and approve answers 422 naming every bad
field (never its value) and decides nothing, so the call still waits for a good decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import tenant_root

WRITE = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "x"}}]}]
SECRET = "hunter2-do-not-echo"


async def _pending(http: httpx.AsyncClient, key: str, sid: str) -> list[dict[str, Any]]:
    inbox = await poll(
        lambda: http.get("/v1/approvals", headers=bearer(key)),
        lambda r: any(e["session"]["id"] == sid for e in r.json()["entries"]),
    )
    entry = next(e for e in inbox.json()["entries"] if e["session"]["id"] == sid)
    pending: list[dict[str, Any]] = entry["pending"]
    return pending


async def test_edited_arguments_the_schema_refuses_are_422_naming_the_field_not_the_value(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    root = tenant_root(workspace, tenant)
    key = await make_key(resources, tenant, "admin", user="erin")
    async with (
        agent_worker(ScriptedProvider.from_data(WRITE), workspace, workspace_scope="tenant") as q,
        gateway_http(migrated, resources, client, queue=q, workspace=workspace) as http,
    ):
        sid = (
            await http.post("/v1/sessions", json={"text": "write b"}, headers=bearer(key))
        ).json()["session_id"]
        [call] = await _pending(http, key, sid)
        approve = f"/v1/sessions/{sid}/calls/{call['tool_call_id']}/approve"
        refused = {
            "content": await http.post(
                approve, json={"arguments": {"path": SECRET, "content": 1234}}, headers=bearer(key)
            ),
            "missing": await http.post(
                approve, json={"arguments": {"path": SECRET}}, headers=bearer(key)
            ),
            "extra": await http.post(
                approve,
                json={"arguments": {"path": "b.txt", "content": "x", "token": SECRET}},
                headers=bearer(key),
            ),
            "all": await http.post(
                approve,
                json={"arguments": {"path": 5, "token": SECRET}},
                headers=bearer(key),
            ),
        }
        still = await _pending(http, key, sid)
        items = (await http.get(f"/v1/sessions/{sid}", headers=bearer(key))).json()["items"]
        approved = await http.post(
            approve, json={"arguments": {"path": "b.txt", "content": "good"}}, headers=bearer(key)
        )
        await poll(
            lambda: http.get(f"/v1/sessions/{sid}", headers=bearer(key)),
            lambda r: r.json()["session"]["status"] == "completed",
        )

    [write_spec] = [t.spec for t in builtin_tools() if t.spec.name == "write_file"]
    assert call["schema"] == write_spec.parameters
    messages = {}
    for name, answer in refused.items():
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["type"] == "invalid_arguments"
        messages[name] = answer.json()["error"]["message"]
        assert SECRET not in answer.text and "1234" not in answer.text
    assert messages["content"] == "edited arguments refused: 'content' must be of type string"
    assert messages["missing"] == "edited arguments refused: 'content' is required"
    assert messages["extra"] == "edited arguments refused: 'token' is not an argument of this tool"
    # Every problem at once, each also on its own in `errors` for a page to list.
    every = [
        "'content' is required",
        "'path' must be of type string",
        "'token' is not an argument of this tool",
    ]
    assert refused["all"].json()["error"]["errors"] == every
    assert messages["all"] == "edited arguments refused: " + "; ".join(every)
    # Refused edits decided nothing and committed nothing: the call still waits.
    assert [p["tool_call_id"] for p in still] == [call["tool_call_id"]]
    assert not [i for i in items if i["kind"] == "approval"]
    assert approved.status_code == 200, approved.text
    assert (root / "b.txt").read_text() == "good"
