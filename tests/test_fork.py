"""`fork`: a task forked at a step runs that step live as a task of its own, from what its
parent committed before it: the parent is not changed, an effectful call of the fork runs
under a fresh idempotency key (the fork re-decides, it does not replay the parent's
effects), and every door refuses what it cannot fork the same way, writing nothing."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.forks import NotForkable
from durable_agents.storage.models import ToolEffectRow
from durable_agents.storage.quotas import TenantFrozen
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.client import tasks
from durable_agents.workers.client.forks import ForkRequest
from durable_agents.workers.client.tenant_controls import freeze
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.effect_tools import bump_tool, executions
from tests.support.gateway import bearer, gateway_http, make_key
from tests.support.helpers import agentctl, session_count, start
from tests.test_fork_lineage import World, rows_of


def _bump(label: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "bump", "arguments": {"label": label}}]}


async def test_a_fork_makes_its_step_live_with_fresh_keys_and_leaves_the_parent_as_it_was(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
) -> None:
    counted = tmp_path / "bumps"
    registry = ToolRegistry.of([*builtin_tools(), bump_tool(counted)])
    model = ScriptedProvider.from_data([_bump("zero"), _bump("one"), {"text": "done"}])
    async with agent_worker(model, workspace, registry=registry) as queue:
        parent, handle = await start(client, resources, queue, "Bump twice.", tenant=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
        before = await rows_of(resources, tenant, uuid.UUID(parent))
        asked_before = len(model.requests)

        request = ForkRequest(parent, 1, instruction="count again", options={"task_queue": queue})
        service = verbs.service(client, resources.sessions, resources.store)
        fork = await service.fork(verbs.operator(tenant), request)
        forked = await asyncio.wait_for(tasks.task_handle(client, fork).result(), 60)

    assert forked.status == "completed"
    assert await rows_of(resources, tenant, uuid.UUID(parent)) == before
    # The parent's two effects ran once each; the fork ran step 1's call again under its own
    # key, and step 0's (which it shares) not at all.
    assert executions(counted) == {
        f"agent-{parent}:0:call_0_0": 1,
        f"agent-{parent}:1:call_1_0": 1,
        f"agent-{fork}:1:call_1_0": 1,
    }
    async with resources.sessions() as db:
        ledger = list(
            await db.scalars(
                select(ToolEffectRow.idempotency_key).where(
                    ToolEffectRow.tenant_id == tenant, ToolEffectRow.session_id == uuid.UUID(fork)
                )
            )
        )
    assert ledger == [f"agent-{fork}:1:call_1_0"]

    row, items = await tasks.read_session(resources.sessions, tenant, fork)
    _, theirs = await tasks.read_session(resources.sessions, tenant, parent)
    assert row.forked_from == uuid.UUID(parent) and row.forked_at is not None
    at = row.forked_at
    step_one = next(
        i for i in theirs if i.kind == ItemKind.ASSISTANT_MESSAGE and i.data["step"] == 1
    )
    assert at == step_one.ordinal - 1
    assert [i.id for i in items if i.ordinal <= at] == [i.id for i in theirs if i.ordinal <= at]
    own = [i for i in items if i.ordinal > at]
    assert (own[0].kind, own[0].text) == (ItemKind.USER_MESSAGE, "count again")
    assert all(i.session_id == uuid.UUID(fork) for i in own)

    # What the fork's model read at step 1: the shared step 0 and its result, the
    # instruction, and nothing the parent did from step 1 on.
    sent = "\n".join(m.content for m in model.requests[asked_before].messages)
    assert f"agent-{parent}:0:call_0_0" in sent and "count again" in sent
    assert f"agent-{parent}:1:call_1_0" not in sent


async def test_every_door_refuses_a_fork_it_cannot_make_and_writes_nothing(
    migrated: StackEndpoints,
    client: Client,
    resources: Resources,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    world = World(resources, tenant, random.Random(3))
    parent = str(await world.task())
    last = max(await world.steps_of(uuid.UUID(parent)))
    words = f"session {parent} has no step {last + 1} (steps 0 to {last})"
    before = await rows_of(resources, tenant, uuid.UUID(parent))
    count = await session_count(resources, tenant)
    service = verbs.service(client, resources.sessions, resources.store)

    with pytest.raises(NotForkable) as refused:
        await service.fork(verbs.operator(tenant), ForkRequest(parent, last + 1))
    assert str(refused.value) == words
    code, _, err = await agentctl(capsys, "fork", parent, "--at", str(last + 1))
    assert (code, err) == (1, f"error: {words}\n")
    owner = await make_key(resources, tenant, "start")
    reader = await make_key(resources, tenant, "read")
    intruder = await make_key(resources, f"{tenant}-x", "admin")
    async with gateway_http(migrated, resources, client) as http:
        url = f"/v1/sessions/{parent}/fork"
        http_refused = await http.post(url, json={"at": last + 1}, headers=bearer(owner))
        not_a_number = await http.post(url, json={"at": "1"}, headers=bearer(owner))
        no_scope = await http.post(url, json={"at": 0}, headers=bearer(reader))
        theirs = await http.post(url, json={"at": 0}, headers=bearer(intruder))
        missing = await http.post(
            f"/v1/sessions/{uuid.uuid4()}/fork", json={"at": 0}, headers=bearer(intruder)
        )
    assert http_refused.status_code == 409
    assert http_refused.json()["error"] == {"type": "conflict", "message": words}
    assert not_a_number.status_code == 400 and "at must be" in not_a_number.text
    assert no_scope.status_code == 403
    assert (theirs.status_code, missing.status_code) == (404, 404)
    assert theirs.json()["error"]["type"] == missing.json()["error"]["type"] == "not_found"
    with pytest.raises(SessionNotFound):
        await service.fork(verbs.operator(f"{tenant}-x"), ForkRequest(parent, 0))

    await freeze(resources.sessions, tenant, "admin")
    with pytest.raises(TenantFrozen):
        await service.fork(verbs.operator(tenant), ForkRequest(parent, 0))
    assert await rows_of(resources, tenant, uuid.UUID(parent)) == before
    assert await session_count(resources, tenant) == count
    async with agent_state(resources.sessions, tenant) as st:
        assert await st.sessions.forks(uuid.UUID(parent)) == []
