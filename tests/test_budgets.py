"""Budgets per task: checked before each model call against committed usage; a task that
reaches its budget parks as budget_exhausted (not failed) with its figures, and a person
with the approve scope raises it: the task goes on from the step it stopped before, with
nothing repeated."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Replayer

from durable_agents import connect
from durable_agents.activities.agents import Agent, AgentDefinitionError, Limits
from durable_agents.activities.policies.admission import budget_figures
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.activities.providers.base import ModelReply, ModelRequest, ProviderCall, Usage
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.usage import UsageRecord, UsageRepository
from durable_agents.storage.usage_models import ModelUsageRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller, ScopeRefused, StartRequest, start_command
from durable_agents.workers.client.tasks import live_status
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import BudgetDefaults, Settings, get_settings
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.budgets import budget_words
from durable_agents.workflows.contracts import BudgetFigures, RaiseBudgetInput, TaskBudget
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import agentctl, session_root, start, tenant_root
from tests.support.runaway import A_TXT, PER_REPLY
from tests.support.verbs import raise_budget
from tests.test_replay import HISTORIES


class Runaway:
    """A model that calls a tool every step, forever (until `answer_at` calls, if set)."""

    name = "runaway"

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.answer_at: int | None = None

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.keys.append(request.idempotency_key)
        usage = Usage(*PER_REPLY)
        if self.answer_at is not None and len(self.keys) >= self.answer_at:
            return ModelReply(text="Enough reading.", usage=usage, model="runaway")
        # One byte more of a.txt (A_TXT) each time: the same result again is a stuck loop.
        more = {"path": "a.txt", "max_bytes": len(self.keys)}
        call = ProviderCall(id=f"c{len(self.keys)}", name="read_file", arguments=more)
        return ModelReply(text="", tool_calls=[call], finish_reason="tool_calls", usage=usage)

    async def aclose(self) -> None:
        return None


async def _status(res: Resources, tenant: str, sid: uuid.UUID) -> str:
    async with res.sessions() as db:
        row = await db.scalar(
            select(SessionRow.status).where(SessionRow.id == sid, SessionRow.tenant_id == tenant)
        )
    return str(row)


async def _parked(res: Resources, tenant: str, sid: uuid.UUID) -> None:
    async def status() -> str:
        return await _status(res, tenant, sid)

    await poll(status, lambda s: s == SessionStatus.BUDGET_EXHAUSTED, within_seconds=60)


async def _counts(res: Resources, tenant: str, sid: uuid.UUID) -> dict[str, int]:
    async with res.sessions() as db:
        rows = await db.execute(
            select(ItemRow.kind, func.count())
            .where(ItemRow.session_id == sid, ItemRow.tenant_id == tenant)
            .group_by(ItemRow.kind)
        )
        usage = await db.scalar(
            select(func.count()).where(
                ModelUsageRow.session_id == sid, ModelUsageRow.tenant_id == tenant
            )
        )
    return {str(k): int(n) for k, n in rows.all()} | {"usage": int(usage or 0)}


async def _replies(res: Resources, sid: uuid.UUID) -> list[ItemRow]:
    async with res.sessions() as db:
        return list(
            await db.scalars(
                select(ItemRow)
                .where(ItemRow.session_id == sid, ItemRow.kind == ItemKind.ASSISTANT_MESSAGE)
                .order_by(ItemRow.ordinal)
            )
        )


async def test_a_runaway_model_parks_at_its_budget_and_a_raise_continues_it_without_repeats(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
) -> None:
    model = Runaway()
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text(A_TXT)
    async with agent_worker(model, workspace) as queue:
        # 110 tokens a reply: after 3 replies (330) the budget of 250 is reached.
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, budget_tokens=250
        )
        await _parked(resources, tenant, sid)
        parked = await _counts(resources, tenant, sid)
        live = await live_status(client, str(sid))
        # Not failed: parked with its figures, every committed item intact.
        assert live.status == SessionStatus.BUDGET_EXHAUSTED
        assert live.last_error == "budget reached: tokens 330 of 250"
        assert len(model.keys) == 3
        assert parked["tool_call"] == parked["usage"] == 3
        # The third reply reached the budget: its call waits at the gate, not run.
        assert parked["tool_result"] == 2
        assert parked["assistant_message"] == 3

        # Another tenant cannot raise it (its session is not found under that tenant).
        with pytest.raises(SessionNotFound):
            await raise_budget(
                client,
                str(sid),
                "mallory",
                sessions=resources.sessions,
                tenant_id=f"{tenant}-x",
                tokens=10_000,
            )
        # Raised by a person: more tokens, and a tool-call budget that stops it again at 5.
        raised = await raise_budget(
            client,
            str(sid),
            "ann",
            sessions=resources.sessions,
            tenant_id=tenant,
            tokens=10_000,
            tool_calls=5,
        )
        assert raised.resumed and (raised.tokens, raised.tool_calls) == (10_000, 5)

        async def steps() -> int:
            return len(model.keys)

        await poll(steps, lambda n: n >= 5, within_seconds=60)
        await _parked(resources, tenant, sid)
        live = await live_status(client, str(sid))
        assert live.last_error == "budget reached: tool_calls 5 of 5"
        assert len(model.keys) == 5

        # The gateway's door: the approve scope raises it; a read key may not.
        model.answer_at = 7
        reader = await make_key(resources, tenant, "read")
        approver = await make_key(resources, tenant, "approve", user="bo")
        async with gateway_http(migrated, resources, client, queue=queue) as http:
            inbox = (await http.get("/v1/approvals", headers=bearer(reader))).json()
            refused = await http.post(
                f"/v1/sessions/{sid}/budget", json={"tool_calls": 50}, headers=bearer(reader)
            )
            bad = await http.post(
                f"/v1/sessions/{sid}/budget", json={"tool_calls": 0}, headers=bearer(approver)
            )
            ok = await http.post(
                f"/v1/sessions/{sid}/budget", json={"tool_calls": 50}, headers=bearer(approver)
            )
        (entry,) = inbox["budgets"]
        assert entry["session"]["id"] == str(sid)
        assert entry["session"]["status"] == "budget_exhausted"
        assert entry["reached"] == "budget reached: tool_calls 5 of 5"
        assert refused.status_code == 403
        assert bad.status_code == 400 and "tool_calls" in bad.text
        assert ok.status_code == 200, ok.text
        assert ok.json()["resumed"] is True and ok.json()["decided_by"] == "bo"
        result = await asyncio.wait_for(_result(handle), 60)
    assert result["status"] == SessionStatus.COMPLETED
    # Parked twice and raised twice, the run replays as it ran (kept as a recorded history).
    history = await handle.fetch_history()
    if os.environ.get("RECORD_HISTORIES"):
        (HISTORIES / "budget_exhausted_raised.json").write_text(history.to_json())
    replayed = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replayed.replay_failure is None

    # Every step once: one provider call per step key, one reply per step, in order.
    replies = await _replies(resources, sid)
    assert len(model.keys) == len(set(model.keys)) == 7
    assert [r.data["step"] for r in replies] == list(range(7))
    assert [r.idempotency_key for r in replies] == model.keys
    done = await _counts(resources, tenant, sid)
    assert done["tool_call"] == done["tool_result"] == 6 and done["usage"] == 7
    # Who raised it, and to what, is in AgentState.
    async with resources.sessions() as db:
        raises = list(
            await db.scalars(
                select(ItemRow)
                .where(ItemRow.session_id == sid, ItemRow.kind == ItemKind.APPROVAL)
                .order_by(ItemRow.ordinal)
            )
        )
    assert [(r.data["decided_by"], r.data["budget_raise"]) for r in raises] == [
        ("ann", {"tokens": 10_000, "tool_calls": 5}),
        ("bo", {"tool_calls": 50}),
    ]


async def _result(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    done = await handle.result()
    return {"status": done.status, "steps": done.steps}


def _settings(migrated: StackEndpoints, **agent: Any) -> Settings:
    settings = migrated.settings(workspace=Path("unused"), task_queue="q", provider="scripted")
    settings.agent = settings.agent.model_copy(update=agent)
    return settings


async def test_budget_options_are_checked_scoped_and_default_from_agent_and_tenant(
    migrated: StackEndpoints,
) -> None:
    starter = Caller("acme", "ann", frozenset({"start"}))
    reader = Caller("acme", "ann", frozenset({"read"}))
    settings = _settings(migrated)
    command = start_command(starter, StartRequest("go", options={"budget_tokens": 500}), settings)
    assert command.options.budget_tokens == 500
    assert command.options.agent_input("s").settings.budget_tokens == 500
    with pytest.raises(ScopeRefused, match="budget_tokens needs the start scope"):
        start_command(reader, StartRequest("go", options={"budget_tokens": 500}), settings)
    for bad in ({"budget_tokens": 0}, {"budget_cost_usd": -1.0}, {"budget_tool_calls": 1.5}):
        with pytest.raises(InvalidTaskInput, match=next(iter(bad))):
            start_command(starter, StartRequest("go", options=bad), settings)
    with pytest.raises(AgentDefinitionError, match="budget_seconds"):
        Limits(budget_seconds=0)

    # Defaults: the agent's Limits and the tenant's, the tighter holding. A start key may
    # tighten them, never loosen them: above the default needs admin (or the operator).
    agent = Agent("capped", "Be brief.", limits=Limits(budget_tokens=1_000, budget_tool_calls=9))
    tenants = {"acme": BudgetDefaults(tokens=600, cost_usd=2.0), "*": BudgetDefaults(tokens=1)}
    settings = _settings(migrated, tenant_budgets=tenants)
    options = start_command(starter, StartRequest("go", agent), settings).options
    assert (options.budget_tokens, options.budget_tool_calls) == (600, 9)
    assert (options.budget_cost_usd, options.budget_seconds) == (2.0, None)
    tighter = StartRequest("go", agent, {"budget_tokens": 300, "budget_tool_calls": 9})
    assert start_command(starter, tighter, settings).options.budget_tokens == 300
    for looser in ({"budget_tokens": 5_000}, {"budget_tokens": 10**12}, {"budget_tool_calls": 10}):
        with pytest.raises(ScopeRefused, match=f"setting {next(iter(looser))} above"):
            start_command(starter, StartRequest("go", agent, looser), settings)
    admin = Caller("acme", "ann", frozenset({"admin"}))
    own = StartRequest("go", agent, {"budget_tokens": 5_000})
    assert start_command(admin, own, settings).options.budget_tokens == 5_000
    operator = Caller.operator("acme")
    assert start_command(operator, own, settings).options.budget_tokens == 5_000
    other = Caller("other", "ann", frozenset({"start"}))
    assert start_command(other, StartRequest("go"), settings).options.budget_tokens == 1


async def test_agentctl_starts_with_a_budget_shows_the_park_and_raises_it(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = Runaway()
    (tenant_root(workspace, tenant) / "a.txt").write_text(A_TXT)
    async with agent_worker(model, workspace, workspace_scope="tenant") as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        code, out, err = await agentctl(capsys, "start", "read", "--budget", "tool_calls=1")
        assert code == 0, err
        session = out.strip()
        sid = uuid.UUID(session)
        await _parked(resources, tenant, sid)
        code, out, _ = await agentctl(capsys, "status", session)
        assert code == 0 and "status=budget_exhausted" in out
        assert "budget reached: tool_calls 1 of 1" in out
        code, out, _ = await agentctl(capsys, "budget", "raise", session, "--tool-calls", "2")
        assert code == 0 and out.startswith("resumed;") and "tool_calls=2" in out

        async def steps() -> int:
            return len(model.keys)

        await poll(steps, lambda n: n >= 2, within_seconds=60)
        await _parked(resources, tenant, sid)
        code, out, _ = await agentctl(capsys, "show", session)
        assert code == 0 and "budget reached: tool_calls 2 of 2" in out
        assert re.search(r"raises the budget: tool_calls 2", out)
        code, _, err = await agentctl(capsys, "budget", "raise", session, "--tool-calls", "0")
        assert code == 1 and "tool_calls" in err
        code, _, err = await agentctl(capsys, "start", "x", "--budget", "tokens=lots")
        assert code == 1 and "budget_tokens must be a whole number, got 'lots'" in err
        await agentctl(capsys, "cancel", session)
    assert len(model.keys) == 2


async def test_the_python_api_starts_with_a_budget_and_raises_it(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = Runaway()
    (tenant_root(workspace, tenant) / "a.txt").write_text(A_TXT)
    async with agent_worker(model, workspace, workspace_scope="tenant") as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        get_settings.cache_clear()
        async with connect(tenant_id=tenant, settings=get_settings()) as api:
            task = await api.start("default", "read", budget_tool_calls=1)
            sid = uuid.UUID(task.session_id)
            await _parked(resources, tenant, sid)
            assert (await task.status()).status == SessionStatus.BUDGET_EXHAUSTED
            raised = await task.raise_budget(by="carol", tool_calls=2)
            assert raised.resumed and raised.tool_calls == 2
            with pytest.raises(WorkflowUpdateFailedError):
                # Refused by the loop's own check too (a client that skipped ours).
                await tasks.task_handle(client, task.session_id).execute_update(
                    AgentWorkflow.raise_budget, RaiseBudgetInput(tenant_id=tenant, tokens=-5)
                )

            async def steps() -> int:
                return len(model.keys)

            await poll(steps, lambda n: n >= 2, within_seconds=60)
            await _parked(resources, tenant, sid)
            await task.cancel()
    assert len(model.keys) == 2


async def test_cost_and_wall_clock_budgets_are_reached_from_committed_figures(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        usage = UsageRepository(db, tenant)
        for n, cost in enumerate((Decimal("0.40"), Decimal("0.35"))):
            await usage.record(UsageRecord(f"k{n}", sid, "default", "p", "m", 10, 5, 0, cost))
        # Created an hour ago: the wall clock counts from the session's start.
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id == sid)
            .values(created_at=datetime.now(UTC) - timedelta(hours=1))
        )

    async def reached(budget: TaskBudget) -> BudgetFigures | None:
        async with resources.sessions() as db:
            session = await SessionRepository(db, tenant).get(sid)
            now = datetime.now(UTC)
            figures = await AgentState(db, tenant).controls.step_figures(sid, day=now.date())
            return budget_figures(figures, session, budget, now)

    assert await reached(TaskBudget(cost_usd=1.0, seconds=7200, tokens=31)) is None
    at_cost = await reached(TaskBudget(cost_usd=0.75, tokens=31))
    assert at_cost is not None and at_cost.reached == ["cost_usd"]
    assert (at_cost.cost_usd, at_cost.tokens) == (0.75, 30)
    late = await reached(TaskBudget(seconds=3500))
    assert late is not None and late.reached == ["seconds"] and late.seconds >= 3600
    assert budget_words(late, TaskBudget(seconds=3500)).startswith("budget reached: seconds 36")
    # An unpriced reply leaves the cost unknown: a cost budget cannot be kept, so it stops.
    async with resources.sessions() as db, db.begin():
        await UsageRepository(db, tenant).record(
            UsageRecord("k9", sid, "default", "p", "unpriced", 1, 1, 0, None)
        )
    unknown = await reached(TaskBudget(cost_usd=100.0))
    assert unknown is not None and unknown.reached == ["cost_usd"] and unknown.cost_usd is None
    assert budget_words(unknown, TaskBudget(cost_usd=100.0)) == (
        "budget reached: cost_usd unpriced of 100.0"
    )
    # Another tenant's read of the same session id finds nothing spent.
    async with resources.sessions() as db:
        spend = await UsageRepository(db, f"{tenant}-x").session_spend(sid)
    assert (spend.tokens, spend.tool_calls) == (0, 0)
