"""Tenant quotas: tokens and cost per UTC day and month are checked before every model step
against what the tenant committed (a task that reaches one parks as quota_exhausted and
goes on once the quota is raised or its period rolls over); running tasks, parked tasks and
starts per minute are checked as a start commits (refused, nothing committed)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from durable_agents.activities.policies.admission import Admission, GateLimits, admit
from durable_agents.storage.admissions import MODEL
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.quotas import QuotaRefused, Quotas, TenantControls
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.usage import UsageFilter, UsageRecord, UsageRepository
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.commands import Caller, StartRequest, start_command
from durable_agents.workers.client.tasks import live_status
from durable_agents.workers.client.tenant_controls import set_quotas
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import Settings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import agentctl, session_root, start, status_of
from tests.support.runaway import A_TXT, REPLY_TOKENS, SlowRunaway

QUOTA = 1_000


async def _until(res: Resources, tenant: str, sid: str, status: str, within: float = 60) -> None:
    async def fetch() -> str | None:
        return await status_of(res, tenant, sid)

    await poll(fetch, lambda s: s == status, within_seconds=within)


async def _sessions(res: Resources, tenant: str) -> int:
    async with res.sessions() as db:
        n = await db.scalar(select(func.count()).where(SessionRow.tenant_id == tenant))
    return int(n or 0)


def _settings(migrated: StackEndpoints, queue: str, **agent: Any) -> Settings:
    settings = migrated.settings(workspace=Path("unused"), task_queue=queue, provider="scripted")
    settings.agent = settings.agent.model_copy(update=agent)
    return settings


async def test_two_tasks_of_a_tenant_stop_at_its_daily_token_quota_within_the_steps_in_flight(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
) -> None:
    model = SlowRunaway(delay=0.05)
    sids = [uuid.uuid4(), uuid.uuid4()]
    for new in sids:
        (session_root(workspace, tenant, new) / "a.txt").write_text(A_TXT)
    await set_quotas(client, resources.sessions, tenant, {"tokens_per_day": QUOTA}, "ops")
    async with agent_worker(model, workspace) as queue:
        started = await asyncio.gather(
            *(start(client, resources, queue, tenant=tenant, session_id=new) for new in sids)
        )
        for sid, _ in started:
            await _until(resources, tenant, sid, SessionStatus.QUOTA_EXHAUSTED)
        async with resources.sessions() as db:
            today = await UsageRepository(db, tenant).total(
                UsageFilter(day=datetime.now(UTC).date())
            )
        # Each task checks before its step against what is committed: the tenant overshoots
        # by at most one reply per task whose check passed before the other's commit.
        in_flight = len(sids) * REPLY_TOKENS
        print(
            f"\nquota {QUOTA} tokens/day, 2 tasks, {REPLY_TOKENS} tokens a reply: "
            f"{today.tokens} committed in {today.replies} replies "
            f"(overshoot {today.tokens - QUOTA}, bound {in_flight})"
        )
        assert QUOTA <= today.tokens <= QUOTA + in_flight
        assert today.replies == len(model.keys)
        live = await live_status(client, started[0][0])
        assert live.status == SessionStatus.QUOTA_EXHAUSTED
        assert live.last_error == f"tenant quota tokens_per_day reached: {today.tokens} of {QUOTA}"

        # A start now is refused before anything commits, in the command layer's words.
        before = await _sessions(resources, tenant)
        command = start_command(
            Caller.operator(tenant), StartRequest("more"), _settings(migrated, queue)
        )
        with pytest.raises(QuotaRefused, match=r"quota tokens_per_day reached: \d+ of 1000"):
            await command.start(client, resources.sessions, resources.store)
        assert await _sessions(resources, tenant) == before

        # Raised by the operator: both go on from the step they stopped before.
        model.answering = True
        state = await set_quotas(
            client, resources.sessions, tenant, {"tokens_per_day": 100_000}, "ops"
        )
        assert state.woken == 2 and state.quotas.tokens_per_day == 100_000
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for _, h in started)), 60)
    assert [r.status for r in results] == [SessionStatus.COMPLETED] * 2
    # No step repeated: one provider call per step key, one reply per step, in order.
    assert len(model.keys) == len(set(model.keys))
    for sid, _ in started:
        async with resources.sessions() as db:
            steps = list(
                await db.scalars(
                    select(ItemRow.data["step"].as_integer())
                    .where(
                        ItemRow.session_id == uuid.UUID(sid), ItemRow.kind == "assistant_message"
                    )
                    .order_by(ItemRow.ordinal)
                )
            )
        assert steps == list(range(len(model.calls_of(sid))))


class Blocked(SlowRunaway):
    """Holds every reply until released: its tasks stay running."""

    def __init__(self) -> None:
        super().__init__(delay=0)
        self.release = asyncio.Event()

    async def complete(self, request: Any) -> Any:
        await self.release.wait()
        self.answering = True
        return await super().complete(request)


async def test_start_quotas_refuse_a_start_at_every_door_before_anything_commits(
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
    model = Blocked()
    async with agent_worker(model, workspace, workspace_scope="tenant") as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        first, handle = await start(client, resources, queue, tenant=tenant)
        await _until(resources, tenant, first, SessionStatus.RUNNING)
        code, out, err = await agentctl(capsys, "quota", "set", "running_tasks=1")
        assert code == 0 and "running_tasks=1 set" in out, err
        words = f"quota running_tasks reached for tenant {tenant!r}: 1 of 1"
        before = await _sessions(resources, tenant)

        command = start_command(
            Caller.operator(tenant), StartRequest("two"), _settings(migrated, queue)
        )
        with pytest.raises(QuotaRefused) as refused:
            await command.start(client, resources.sessions, resources.store)
        assert str(refused.value).startswith(words)
        code, _, err = await agentctl(capsys, "start", "two")
        assert code == 1 and words in err
        starter = await make_key(resources, tenant, "start")
        async with gateway_http(migrated, resources, client, queue=queue) as http:
            answer = await http.post("/v1/sessions", json={"text": "two"}, headers=bearer(starter))
        assert answer.status_code == 429
        assert answer.json()["error"]["type"] == "quota_exceeded"
        assert answer.json()["error"]["message"].startswith(words)
        assert await _sessions(resources, tenant) == before

        # A start per minute: the first task started within it.
        code, _, _ = await agentctl(
            capsys, "quota", "set", "starts_per_minute=1", "--clear", "running_tasks"
        )
        assert code == 0
        with pytest.raises(QuotaRefused, match=r"quota starts_per_minute reached.*1 of 1"):
            await command.start(client, resources.sessions, resources.store)
        code, out, _ = await agentctl(capsys, "quota", "show")
        assert "running_tasks=unlimited" in out and "starts_per_minute=1 set" in out
        model.release.set()
        assert (await asyncio.wait_for(handle.result(), 60)).status == SessionStatus.COMPLETED
    assert await _sessions(resources, tenant) == before


async def test_quota_checks_count_the_tenants_committed_spend_by_day_and_month(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    now = datetime(2026, 3, 31, 23, 0, tzinfo=UTC)
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        usage = UsageRepository(db, tenant)
        for n, day in enumerate((now.date() - timedelta(days=1), now.date())):
            await usage.record(
                UsageRecord(f"k{n}", sid, "default", "p", "m", 60, 0, 0, Decimal("0.5")), day=day
            )
        # Counted once: the same key again adds nothing to the tenant's day.
        await usage.record(UsageRecord("k1", sid, "default", "p", "m", 60, 0), day=now.date())

    async def gate(quotas: Quotas, at: datetime = now) -> Any:
        """The model call's gate, in a transaction rolled back: nothing is admitted."""
        async with resources.sessions() as db, db.begin():
            session = await SessionRepository(db, tenant).get(sid)
            request = Admission(MODEL, "model-key", session, None)
            gate = await admit(AgentState(db, tenant), request, GateLimits(quotas), now=at)
            await db.rollback()
            return gate.closed

    assert await gate(Quotas(tokens_per_day=61, tokens_per_month=121)) is None
    day = await gate(Quotas(tokens_per_day=60))
    assert day.quota.words == "tokens_per_day reached: 60 of 60"
    assert day.quota.resets_in_seconds == 3600  # UTC midnight
    month = await gate(Quotas(cost_usd_per_month=1.0))
    assert month.quota.words == "cost_usd_per_month reached: 1.000000 of 1.0"
    # The next day (and month) counts afresh.
    assert await gate(Quotas(tokens_per_day=60), now + timedelta(hours=2)) is None
    assert await gate(Quotas(tokens_per_month=100), now + timedelta(hours=2)) is None
    # The table's figure replaces the default; another tenant's spend is not this one's.
    async with resources.sessions() as db, db.begin():
        await TenantControls(db, tenant).set_quotas({"tokens_per_day": 1_000}, "ops")
    assert await gate(Quotas(tokens_per_day=60)) is None
    async with resources.sessions() as db:
        other = await TenantControls(db, f"{tenant}-x").spent(now.date(), now.date())
    assert other.tokens == 0


async def test_agentctl_quota_set_refuses_a_bad_figure_naming_it(
    cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = await agentctl(capsys, "quota", "set", "tokens_per_day=-5")
    assert code == 1 and "tokens_per_day: Input should be greater than or equal to 0" in err
    code, _, err = await agentctl(capsys, "quota", "set", "tokens_per_hour=5")
    assert code == 1 and "NAME one of tokens_per_day" in err
    code, _, err = await agentctl(capsys, "quota", "set", "running_tasks=lots")
    assert code == 1 and "quota running_tasks: not a number" in err
