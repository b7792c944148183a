"""Sub-agents via `delegate`, and per-task approval policies on the call's arguments."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.activities.policies.approval_policy import PolicyError, needs_approval, validate
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, session_root, start, wait_for_pending


async def test_delegate_runs_a_child_session_and_returns_only_its_summary_and_refs(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    # The child session works in its parent's workspace (its root session's).
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "notes.md").write_text(
        "# Notes\nthe child reads this\n"
    )
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {
                        "name": "delegate",
                        "arguments": {"task": "SUB: read notes.md", "agent": "reader"},
                    }
                ]
            }
        ],
        by_task={
            "SUB:": [
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.md"}}]},
                {"text": "notes.md is a short note about the child"},
            ]
        },
    )
    async with agent_worker(provider, workspace, sandbox="strict") as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    parent_items = await items_of(resources, tenant, session_id)
    delegated = next(i for i in parent_items if i.kind == "tool_result")
    child_id = delegated.data["child_session_id"]
    async with resources.sessions() as db:
        child = await SessionRepository(db, tenant).get(uuid.UUID(child_id))
    assert child.parent_id == uuid.UUID(session_id) and child.root_id == uuid.UUID(session_id)
    assert child.agent_name == "reader" and child.status == "completed"
    # The parent's model saw the child's summary and refs, not the child's conversation.
    told = next(m for m in provider.requests[-1].messages if m.role == "tool").content
    report = json.loads(told)
    assert report["summary"] == "notes.md is a short note about the child"
    assert report["status"] == "completed" and len(report["artifacts"]) == 1
    assert "the child reads this" not in told
    assert not any("the child reads this" in i.text for i in parent_items)
    child_items = await items_of(resources, tenant, child_id)
    assert any("the child reads this" in i.text for i in child_items)


async def test_outside_policy_lets_reports_through_and_holds_anything_else(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "out/report.md", "content": "ok"}},
                    {"name": "write_file", "arguments": {"path": "src/app.py", "content": "risky"}},
                ]
            }
        ]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            # Loosening write_file's own "always": the operator's choice, recorded as such.
            loosened_approvals={"write_file": "outside:out"},
            loosened_by="operator",
        )
        pending = await wait_for_pending(client, session_id)
        assert pending == ["call_0_1"]  # only the write outside out/ waits
        other = f"{tenant}-other"
        # Another tenant's session is not found (tests/test_tenant_checks.py has the rest).
        with pytest.raises(SessionNotFound):
            await verbs.approve(
                client,
                session_id,
                "call_0_1",
                "mallory",
                sessions=resources.sessions,
                tenant_id=other,
            )
        await verbs.approve(
            client,
            session_id,
            "call_0_1",
            "alice",
            tenant_id=tenant,
            device_id="phone",
            sessions=resources.sessions,
            edited_arguments={"path": "src/app.py", "content": "safe"},
        )
        await asyncio.wait_for(handle.result(), 30)

    root = workspace / tenant / session_id
    assert (root / "out/report.md").read_text() == "ok"
    assert (root / "src/app.py").read_text() == "safe"  # the edited arguments ran
    decision = next(
        i
        for i in await items_of(resources, tenant, session_id)
        if i.kind == "approval" and "approved" in i.data
    )
    assert decision.data["device_id"] == "phone" and decision.data["decided_by"] == "alice"
    assert decision.data["arguments"] == {"path": "src/app.py", "content": "safe"}


@pytest.mark.parametrize(
    ("policy", "args", "needed"),
    [
        ("never", {"path": "/etc/x"}, False),
        ("always", {}, True),
        ("outside:out", {"path": "out/a.md"}, False),
        ("outside:out", {"path": "out/../secrets"}, True),
        ("outside:out", {"path": "/abs/out/a"}, True),
        ("outside:out", {"path": "outside.md"}, True),
        ("outside:out", {}, True),
        ("match:url:^https://internal\\.", {"url": "https://internal.example/x"}, True),
        ("match:url:^https://internal\\.", {"url": "https://example.org"}, False),
    ],
)
def test_policy_rules(policy: str, args: dict[str, object], needed: bool) -> None:
    assert needs_approval(policy, args) is needed


@pytest.mark.parametrize("bad", ["sometimes", "outside:", "match:url", "match:url:(", "never:x"])
def test_bad_policies_are_refused_with_a_clear_error(bad: str) -> None:
    with pytest.raises(PolicyError, match=r"approval policy|bad regex"):
        validate(bad)
