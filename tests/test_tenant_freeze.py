"""The kill switch: freezing a tenant parks every running task of it at its next model step
(frozen, with every committed item kept), refuses its starts and its devices' calls; a thaw
lets each go on from the step it stopped before, none repeated."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.models import ItemRow
from durable_agents.storage.quota_models import TenantControlRow
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.tasks import live_status
from durable_agents.workers.client.tenant_controls import freeze, set_quotas, thaw
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import AgentInput
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support.device_gateway import make_device_key
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import agentctl, committed_rows, session_root, start
from tests.support.runaway import A_TXT, SlowRunaway
from tests.test_plain_start_checks import _refusal
from tests.test_quotas import _until
from tests.test_replay import HISTORIES


async def _items(res: Resources, tenant: str, sid: str) -> list[tuple[str, str]]:
    async with res.sessions() as db:
        rows = await db.execute(
            select(ItemRow.kind, ItemRow.idempotency_key)
            .where(ItemRow.session_id == uuid.UUID(sid), ItemRow.tenant_id == tenant)
            .order_by(ItemRow.ordinal)
        )
    return [(str(k), str(key)) for k, key in rows.all()]


async def test_a_frozen_tenants_tasks_park_within_a_step_starts_are_refused_and_thaw_resumes(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = SlowRunaway(delay=0.2)
    sids = [uuid.uuid4(), uuid.uuid4()]
    for new in sids:
        (session_root(workspace, tenant, new) / "a.txt").write_text(A_TXT)
    admin = await make_key(resources, tenant, "admin", user="ops")
    starter = await make_key(resources, tenant, "start")
    stranger = await make_key(resources, f"{tenant}-x", "admin")
    device = bearer(await make_device_key(resources, tenant, "laptop"))
    async with agent_worker(model, workspace) as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        # Steps to spare: with no workflow cache a worker may run one task's steps before the
        # other's, and neither may end at its step limit before the freeze.
        started = await asyncio.gather(
            *(
                start(client, resources, queue, tenant=tenant, session_id=new, max_steps=500)
                for new in sids
            )
        )

        async def steps() -> int:
            return min(len(model.calls_of(s)) for s, _ in started)

        await poll(steps, lambda n: n >= 2, within_seconds=60)
        async with gateway_http(migrated, resources, client, queue=queue) as http:
            refused = await http.post("/v1/tenant/freeze", headers=bearer(starter))
            assert refused.status_code == 403
            at_freeze = {s: len(model.calls_of(s)) for s, _ in started}
            frozen = await http.post("/v1/tenant/freeze", headers=bearer(admin))
            assert frozen.status_code == 200 and frozen.json()["frozen"] is True
            for sid, _ in started:
                await _until(resources, tenant, sid, SessionStatus.FROZEN)
            # Within one step: at most the call already under way when the freeze committed.
            for sid, _ in started:
                assert len(model.calls_of(sid)) <= at_freeze[sid] + 1
            start_refused = await http.post(
                "/v1/sessions", json={"text": "more"}, headers=bearer(starter)
            )
            assert start_refused.status_code == 403
            assert start_refused.json()["error"]["type"] == "tenant_frozen"
            polled = await http.post("/v1/device/calls/next?wait=0", headers=device)
            assert polled.status_code == 403 and "frozen" in polled.text
            other = await http.get("/v1/tenant", headers=bearer(stranger))
            assert other.json()["frozen"] is False  # another tenant runs on
        code, _, err = await agentctl(capsys, "start", "more")
        assert code == 1 and f"tenant {tenant!r} is frozen" in err

        first = started[0][0]
        live = await live_status(client, first)
        assert live.status == SessionStatus.FROZEN and live.last_error is not None
        code, out, _ = await agentctl(capsys, "status", first)
        assert code == 0 and "status=frozen" in out and "tenant frozen" in out
        code, out, _ = await agentctl(capsys, "show", first)
        assert code == 0 and "· frozen" in out and "tenant frozen: the task goes on" in out
        kept = {s: await _items(resources, tenant, s) for s, _ in started}
        calls = len(model.keys)
        await asyncio.sleep(1.0)
        assert len(model.keys) == calls  # parked: nothing runs

        model.answering = True
        code, out, err = await agentctl(capsys, "tenant", "thaw")
        assert code == 0 and "woke 2 parked task(s)" in out, err
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for _, h in started)), 60)
    assert [r.status for r in results] == [SessionStatus.COMPLETED] * 2
    for sid, _ in started:
        items = await _items(resources, tenant, sid)
        # Every committed item kept as it was, each step's reply once and in order.
        assert items[: len(kept[sid])] == kept[sid]
        keys = Counter(key for kind, key in items if kind == "assistant_message")
        assert all(n == 1 for n in keys.values())
        assert model.calls_of(sid) == list(keys)
    assert len(model.keys) == len(set(model.keys))
    history = await started[0][1].fetch_history()
    if os.environ.get("RECORD_HISTORIES"):
        (HISTORIES / "tenant_frozen_thawed.json").write_text(history.to_json())
    replayed = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replayed.replay_failure is None


async def test_a_plain_temporal_start_of_a_frozen_or_full_tenant_is_refused_in_the_same_words(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(ScriptedProvider.from_data([{"text": "done"}]), workspace) as queue:

        async def plain_start() -> ApplicationError:
            sid = str(uuid.uuid4())
            handle = await client.start_workflow(
                "AgentWorkflow",
                AgentInput(session_id=sid, tenant_id=tenant, task_text="hello"),
                id=workflow_id_for(sid),
                task_queue=queue,
            )
            return await _refusal(handle)

        await make_key(resources, tenant, "admin")  # the tenant exists once a key names it
        await freeze(resources.sessions, tenant, "ops")
        cause = await plain_start()
        assert cause.type == "TenantFrozen"
        assert f"tenant {tenant!r} is frozen" in cause.message
        await thaw(client, resources.sessions, tenant, "ops")
        await set_quotas(client, resources.sessions, tenant, {"starts_per_minute": 0}, "ops")
        cause = await plain_start()
        assert cause.type == "QuotaRefused"
        assert f"quota starts_per_minute reached for tenant {tenant!r}: 0 of 0" in cause.message
    assert await committed_rows(resources, tenant) == {"sessions": 0, "items": 0, "artifacts": 0}


async def _control_rows(res: Resources, tenant: str) -> int:
    async with res.sessions() as db:
        stmt = select(func.count()).where(TenantControlRow.tenant_id == tenant)
        return int(await db.scalar(stmt) or 0)


async def test_freeze_and_thaw_refuse_a_tenant_nothing_names_and_write_nothing(
    resources: Resources, tenant: str, cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    for verb in ("freeze", "thaw"):
        code, out, err = await agentctl(capsys, "tenant", verb, "--tenant", tenant)
        assert (code, out) == (1, "")
        assert err == (
            f"error: no tenant {tenant!r}: it has no session, API key, device or quota yet\n"
        )
    assert await _control_rows(resources, tenant) == 0
    # One key is enough for a tenant to exist.
    await make_key(resources, tenant, "start")
    code, out, _ = await agentctl(capsys, "tenant", "freeze", "--tenant", tenant)
    assert (code, out.strip()) == (0, f"tenant {tenant}: frozen")
    code, out, _ = await agentctl(capsys, "tenant", "thaw", "--tenant", tenant)
    assert (code, out.strip()) == (0, f"tenant {tenant}: thawed; woke 0 parked task(s)")
