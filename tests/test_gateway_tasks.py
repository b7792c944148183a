"""Tasks driven through the gateway only: start, the approvals inbox, approve with edited
arguments, reject with a reason, follow-ups, cancel and resume, paged reads, and artifact
downloads by redirect. A real cloud worker runs each task with a scripted model."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key, poll, session_status
from tests.support.helpers import tenant_root

READ_THEN_WRITE = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "model"}}]},
]


async def _inbox_entry(http: httpx.AsyncClient, key: str, sid: str) -> dict[str, Any]:
    inbox = await poll(
        lambda: http.get("/v1/approvals", headers=bearer(key)),
        lambda r: any(e["session"]["id"] == sid for e in r.json()["entries"]),
    )
    entry: dict[str, Any] = next(e for e in inbox.json()["entries"] if e["session"]["id"] == sid)
    return entry


async def test_start_approve_with_edited_arguments_and_download_the_artifact_over_http(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    root = tenant_root(workspace, tenant)
    (root / "a.txt").write_bytes(b"alpha bytes for the artifact")
    key = await make_key(resources, tenant, "read", "start", "approve", user="carol")
    provider = ScriptedProvider.from_data(READ_THEN_WRITE)
    async with (
        agent_worker(provider, workspace, workspace_scope="tenant") as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        started = await http.post(
            "/v1/sessions", json={"text": "copy a to b", "max_steps": 5}, headers=bearer(key)
        )
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]

        entry = await _inbox_entry(http, key, sid)
        assert entry["session"]["status"] == "waiting_approval"
        [call] = entry["pending"]
        assert call["name"] == "write_file"
        assert call["arguments"] == {"path": "b.txt", "content": "model"}

        unknown = await http.post(
            f"/v1/sessions/{sid}/calls/call_9_9/approve", json={}, headers=bearer(key)
        )
        assert unknown.status_code == 409 and "call_9_9" in unknown.json()["error"]["message"]

        approved = await http.post(
            f"/v1/sessions/{sid}/calls/{call['tool_call_id']}/approve",
            json={"arguments": {"path": "b.txt", "content": "edited by carol"}},
            headers=bearer(key),
        )
        assert approved.status_code == 200, approved.text
        assert approved.json() == {
            "tool_call_id": call["tool_call_id"],
            "approved": True,
            "decided_by": "carol",
        }
        await poll(lambda: session_status(http, key, sid), lambda s: s == "completed")

        page = (await http.get(f"/v1/sessions/{sid}", headers=bearer(key))).json()
        first = (await http.get(f"/v1/sessions/{sid}?after=0&limit=2", headers=bearer(key))).json()
        rest = (await http.get(f"/v1/sessions/{sid}?after=2", headers=bearer(key))).json()
        listed = (await http.get("/v1/sessions?limit=1", headers=bearer(key))).json()

        result = next(i for i in page["items"] if i["kind"] == "tool_result" and i["artifact_id"])
        redirect = await http.get(f"/v1/artifacts/{result['artifact_id']}", headers=bearer(key))
    assert (root / "b.txt").read_text() == "edited by carol"
    decisions = [i for i in page["items"] if i["kind"] == "approval" and "approved" in i["data"]]
    assert decisions[0]["data"]["decided_by"] == "carol"

    ordinals = [i["ordinal"] for i in page["items"]]
    assert [i["ordinal"] for i in first["items"]] == ordinals[:2] and first["next_after"] == 2
    assert [i["ordinal"] for i in rest["items"]] == ordinals[2:] and rest["next_after"] is None
    assert [s["id"] for s in listed["sessions"]] == [sid]

    # The redirect is to a short-lived presigned URL: no credentials needed, right bytes.
    assert redirect.status_code == 307
    assert redirect.headers["Cache-Control"] == "no-store"
    location = redirect.headers["Location"]
    assert "X-Amz-Expires=60" in location and "X-Amz-Signature" in location
    async with httpx.AsyncClient() as plain:
        body = (await plain.get(location)).content
    digest = hashlib.sha256(body).hexdigest()
    assert body == b"alpha bytes for the artifact"
    assert digest == redirect.headers["X-Artifact-SHA256"] == result["data"]["artifact"]["sha256"]


async def test_reject_with_a_reason_and_send_a_follow_up_over_http(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    (tenant_root(workspace, tenant) / "a.txt").write_text("alpha")
    key = await make_key(resources, tenant, "admin", user="dave")
    provider = ScriptedProvider.from_data(READ_THEN_WRITE)
    async with (
        agent_worker(provider, workspace, workspace_scope="tenant") as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        sid = (
            await http.post("/v1/sessions", json={"text": "copy a to b"}, headers=bearer(key))
        ).json()["session_id"]
        [call] = (await _inbox_entry(http, key, sid))["pending"]
        sent = await http.post(
            f"/v1/sessions/{sid}/messages", json={"text": "also say hi"}, headers=bearer(key)
        )
        assert sent.status_code == 202, sent.text
        rejected = await http.post(
            f"/v1/sessions/{sid}/calls/{call['tool_call_id']}/reject",
            json={"reason": "b.txt must not change"},
            headers=bearer(key),
        )
        assert rejected.status_code == 200, rejected.text
        assert rejected.json()["approved"] is False
        await poll(lambda: session_status(http, key, sid), lambda s: s == "completed")
        items = (await http.get(f"/v1/sessions/{sid}", headers=bearer(key))).json()["items"]
    assert not (tenant_root(workspace, tenant) / "b.txt").exists()
    decision = next(i for i in items if i["kind"] == "approval" and "approved" in i["data"])
    assert decision["data"]["decided_by"] == "dave"
    assert decision["data"]["reason"] == "b.txt must not change"
    told = [m.content for r in provider.requests for m in r.messages if m.role == "tool"]
    assert any("rejected by dave" in t and "b.txt must not change" in t for t in told)
    assert any(i["kind"] == "user_message" and i["text"] == "also say hi" for i in items)


async def test_cancel_and_resume_over_http(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    (tenant_root(workspace, tenant) / "a.txt").write_text("alpha")
    key = await make_key(resources, tenant, "read", "start")
    provider = ScriptedProvider.from_data(READ_THEN_WRITE)
    async with (
        agent_worker(provider, workspace, workspace_scope="tenant") as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        sid = (
            await http.post("/v1/sessions", json={"text": "copy a to b"}, headers=bearer(key))
        ).json()["session_id"]
        await _inbox_entry(http, key, sid)
        running = await http.post(f"/v1/sessions/{sid}/resume", headers=bearer(key))
        cancelled = await http.post(f"/v1/sessions/{sid}/cancel", headers=bearer(key))
        await poll(lambda: session_status(http, key, sid), lambda s: s == "cancelled")
        # The session row says cancelled a moment before the workflow run closes.
        await poll(tasks.task_handle(client, sid).describe, lambda d: d.close_time is not None)
        again = await http.post(f"/v1/sessions/{sid}/cancel", headers=bearer(key))
        resumed = await http.post(f"/v1/sessions/{sid}/resume", json={}, headers=bearer(key))
        await poll(lambda: session_status(http, key, sid), lambda s: s == "waiting_approval")
        await http.post(f"/v1/sessions/{sid}/cancel", headers=bearer(key))
    assert running.status_code == 409 and "running" in running.json()["error"]["message"]
    assert cancelled.json() == {"session_id": sid, "cancelled": True}
    assert again.json() == {"session_id": sid, "cancelled": False}
    assert resumed.status_code == 200, resumed.text
