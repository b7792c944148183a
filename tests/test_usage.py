"""Usage, counted once: each model reply's usage as the provider reported it is committed
with the reply under its idempotency key, priced by the worker's table (unpriced: null),
and read per session, agent, tenant and day through agentctl and GET /v1/usage."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import func, select
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.compaction import CompactionActivities
from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context.model_context import config_of
from durable_agents.activities.model_call import ModelActivities
from durable_agents.activities.policies.pricing import Price, PriceTable
from durable_agents.activities.providers.base import ChatMessage, ModelReply, ModelRequest, Usage
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.usage import UsageFilter, UsageRecord, UsageRepository
from durable_agents.storage.usage_models import ModelUsageRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.contracts import CompactInput, ModelCallInput
from tests.conftest import AgentRunner
from tests.support.fake_openai import (
    FakeOpenAI,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    says,
    tool_call_reply,
    with_usage,
)
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import agentctl, session_root, start

PRICE = Price(input=Decimal("1"), output=Decimal("2"), cached=Decimal("0.5"))
# Two replies as the server reports them: (prompt, completion, cached).
REPORTED = [(1200, 30, 800), (1900, 12, 1100)]


def _cost(prompt: int, completion: int, cached: int) -> Decimal:
    return ((prompt - cached) * 1 + cached * Decimal("0.5") + completion * 2) / 1_000_000


@pytest.fixture
async def provider(server: FakeOpenAI) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider(base_url=server.url, api_key="sk-test", model="gpt-x", timeout=5)
    yield p
    await p.aclose()


def test_prices_turn_tokens_into_cost_and_an_unpriced_model_costs_null() -> None:
    table = PriceTable(prices={"openai/gpt-x": PRICE, "anthropic/*": PRICE})
    usage = Usage(input_tokens=1200, output_tokens=30, cached_tokens=800)
    assert table.cost("openai", "gpt-x", usage) == _cost(1200, 30, 800)
    assert table.cost("anthropic", "claude-any", usage) == _cost(1200, 30, 800)
    assert table.cost("openai", "gpt-other", usage) is None
    assert PriceTable().cost("openai", "gpt-x", usage) is None
    # No cached price: cached tokens cost what input costs, never less.
    plain = PriceTable(prices={"openai/gpt-x": Price(input=Decimal(1), output=Decimal(2))})
    assert plain.cost("openai", "gpt-x", usage) == Decimal(1200 + 60) / 1_000_000


@pytest.mark.parametrize("stream", [True, False])
async def test_the_provider_reads_cached_tokens_streamed_or_not(
    server: FakeOpenAI, stream: bool
) -> None:
    server.reply = with_usage(says("hi"), 1200, 30, 800)
    p = OpenAICompatibleProvider(base_url=server.url, api_key="k", model="gpt-x", timeout=5)
    try:

        async def ignore(_: str) -> None:
            return None

        reply = await p.complete(
            ModelRequest(
                model="gpt-x",
                messages=[ChatMessage("user", "hi")],
                tools=[],
                idempotency_key="k1",
                on_text=ignore if stream else None,
            )
        )
    finally:
        await p.aclose()
    assert reply.usage == Usage(input_tokens=1200, output_tokens=30, cached_tokens=800)


async def _usage_rows(res: Resources, tenant: str, sid: str) -> list[ModelUsageRow]:
    async with res.sessions() as db:
        rows = await db.scalars(
            select(ModelUsageRow).where(
                ModelUsageRow.tenant_id == tenant, ModelUsageRow.session_id == uuid.UUID(sid)
            )
        )
        return list(rows)


async def test_a_run_counts_what_the_provider_reported_and_agentctl_and_the_gateway_read_it(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (first, second) = REPORTED
    server.queued = [
        with_usage(tool_call_reply('{"path": "a.txt"}'), *first),
        with_usage(says("A says alpha."), *second),
    ]
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text("alpha")
    prices = {"openai/gpt-x": PRICE}
    async with agent_worker(provider, workspace, name="gpt-x", prices=prices) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    assert len(server.requests) == 2

    # One row per reply (each workflow task replayed the history: no step counted twice),
    # each under its reply's idempotency key, with the figures the server reported.
    rows = sorted(await _usage_rows(resources, tenant, str(sid)), key=lambda r: r.created_at)
    async with resources.sessions() as db:
        replies = list(
            await db.scalars(
                select(ItemRow)
                .where(ItemRow.session_id == sid, ItemRow.kind == ItemKind.ASSISTANT_MESSAGE)
                .order_by(ItemRow.ordinal)
            )
        )
    assert [r.idempotency_key for r in rows] == [r.idempotency_key for r in replies]
    assert [(r.input_tokens, r.output_tokens, r.cached_tokens) for r in rows] == REPORTED
    assert [r.cost_usd for r in rows] == [_cost(*first), _cost(*second)]
    assert {(r.provider, r.model, r.agent, r.day) for r in rows} == {
        ("openai", "gpt-x", "default", datetime.now(UTC).date())
    }
    want_cost = _cost(*first) + _cost(*second)

    # agentctl usage: the tenant from AGENT_TENANT_ID, one session or the whole tenant.
    for args in (("--session", str(sid)), (), ("--agent", "default"), ("--since", "2020-01-01")):
        code, out, _ = await agentctl(capsys, "usage", *args)
        assert code == 0, out
        total = next(line for line in out.splitlines() if "total" in line)
        figures = re.findall(r"[\d.]+", total)
        assert figures == ["2", "3100", "42", "1900", f"{want_cost:.6f}"], total
    code, out, _ = await agentctl(capsys, "usage", "--tenant", f"{tenant}-other")
    assert code == 0 and re.findall(r"[\d.]+", _total_line(out)) == ["0", "0", "0", "0", "0.000000"]
    code, _, err = await agentctl(capsys, "usage", "--day", "yesterday")
    assert code == 2 and "--day" in err

    # GET /v1/usage: the tenant is the key's; another tenant's key sees nothing of it.
    mine = await make_key(resources, tenant, "read")
    theirs = await make_key(resources, f"{tenant}-other", "read")
    async with gateway_http(migrated, resources, client) as http:
        got = (await http.get("/v1/usage", headers=bearer(mine))).json()
        per_session = await http.get(f"/v1/usage?session={sid}", headers=bearer(mine))
        other = await http.get(f"/v1/usage?session={sid}", headers=bearer(theirs))
        bad = await http.get("/v1/usage?day=2026-01-01&since=2026-01-01", headers=bearer(mine))
        nobody = await http.get("/v1/usage")
    total = got["total"]
    assert (total["replies"], total["input_tokens"], total["output_tokens"]) == (2, 3100, 42)
    assert total["cached_tokens"] == 1900 and Decimal(total["cost_usd"]) == want_cost
    (group,) = got["groups"]
    assert (group["agent"], group["provider"], group["model"]) == ("default", "openai", "gpt-x")
    assert per_session.json()["total"] == total
    assert other.status_code == 200 and other.json()["total"]["replies"] == 0
    assert other.json()["groups"] == []
    assert bad.status_code == 400 and "since" in bad.text
    assert nobody.status_code == 401


def _total_line(out: str) -> str:
    return next(line for line in out.splitlines() if "total" in line)


async def _session(resources: Resources, tenant: str) -> str:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        await ItemRepository(db, tenant).append(
            NewItem(sid, ItemKind.USER_MESSAGE, "user", f"{sid}:task", text="Say it.")
        )
    return str(sid)


async def test_a_retried_model_step_counts_once(
    server: FakeOpenAI, provider: OpenAICompatibleProvider, resources: Resources, tenant: str
) -> None:
    """Two attempts of one step both reach the provider (the first was presumed lost while
    it still ran), both commit: the reply and its usage exist once. A later retry that finds
    the reply committed adds nothing either."""
    acts = ModelActivities(
        resources.sessions,
        resources.store,
        provider,
        default_registry(),
        model="gpt-x",
        system_prompt="Be brief.",
        budget=ContextBudget(),
        prices=PriceTable(prices={"openai/gpt-x": PRICE}),
    )
    server.reply = with_usage(says("Said."), *REPORTED[0])
    server.hold = asyncio.Event()
    sid = await _session(resources, tenant)
    inp = ModelCallInput(sid, tenant, 0, f"{sid}:0:model")
    attempts = [
        asyncio.create_task(ActivityEnvironment().run(acts.call_model, inp)) for _ in range(2)
    ]

    async def sent() -> int:
        return len(server.requests)

    await poll(sent, lambda n: n >= 2, within_seconds=20)
    server.hold.set()
    one, two = await asyncio.gather(*attempts)
    again = await ActivityEnvironment().run(acts.call_model, inp)
    assert one.item_id == two.item_id == again.item_id
    assert len(server.requests) == 2  # the third found the reply committed

    rows = await _usage_rows(resources, tenant, sid)
    assert [
        (r.idempotency_key, r.input_tokens, r.output_tokens, r.cached_tokens) for r in rows
    ] == [(inp.idempotency_key, *REPORTED[0])]
    async with resources.sessions() as db:
        total = await UsageRepository(db, tenant).total(UsageFilter(session_id=uuid.UUID(sid)))
        spend = await UsageRepository(db, tenant).session_spend(uuid.UUID(sid))
    assert (total.replies, total.input_tokens, total.cost_usd) == (1, 1200, _cost(*REPORTED[0]))
    # The running sums a budget check reads grew once too.
    assert (spend.tokens, spend.cost_usd, spend.tool_calls) == (1230, _cost(*REPORTED[0]), 0)


async def test_sums_by_day_and_agent_and_a_partly_unpriced_sum_is_null(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()

    def rec(key: str, agent: str, cost: Decimal | None) -> UsageRecord:
        return UsageRecord(key, sid, agent, "openai", "gpt-x", 100, 10, 5, cost)

    async with resources.sessions() as db, db.begin():
        repo = UsageRepository(db, tenant)
        assert await repo.record(rec("k1", "a", Decimal("0.01")), day=date(2026, 1, 1))
        assert await repo.record(rec("k2", "a", Decimal("0.02")), day=date(2026, 1, 2))
        assert await repo.record(rec("k3", "b", None), day=date(2026, 1, 2))
        # The same key again (a retry, a replay): not counted.
        assert not await repo.record(rec("k1", "a", Decimal("9")), day=date(2026, 1, 3))
        with pytest.raises(ValueError, match="token counts"):
            await repo.record(UsageRecord("k4", sid, "a", "openai", "gpt-x", -1, 0))
    async with resources.sessions() as db:
        repo = UsageRepository(db, tenant)
        whole = await repo.total()
        a_only = await repo.total(UsageFilter(agent="a"))
        day2 = await repo.total(UsageFilter(day=date(2026, 1, 2)))
        since2 = await repo.grouped(UsageFilter(since=date(2026, 1, 2)))
        other = await UsageRepository(db, f"{tenant}-x").total()
        spend = await repo.session_spend(sid)
        stranger = await UsageRepository(db, f"{tenant}-x").session_spend(sid)
        count = await db.scalar(
            select(func.count()).select_from(ModelUsageRow).where(ModelUsageRow.tenant_id == tenant)
        )
    assert count == 3
    assert (whole.replies, whole.input_tokens, whole.cost_usd, whole.unpriced_replies) == (
        3,
        300,
        None,
        1,
    )
    assert (a_only.replies, a_only.cost_usd) == (2, Decimal("0.03"))
    assert (day2.replies, day2.cost_usd) == (2, None)
    assert [(g.day, g.agent, g.cost_usd) for g in since2] == [
        (date(2026, 1, 2), "a", Decimal("0.02")),
        (date(2026, 1, 2), "b", None),
    ]
    assert (other.replies, other.input_tokens, other.cost_usd) == (0, 0, Decimal(0))
    # One unpriced reply: the session's cost is unknown, never the priced part alone.
    assert (spend.tokens, spend.cost_usd, spend.tool_calls) == (330, None, 0)
    assert (stranger.tokens, stranger.cost_usd) == (0, Decimal(0))


class _Recording:
    """A provider that reports a different usage for every reply, and keeps them."""

    name = "scripted"

    def __init__(self) -> None:
        self._inner = ScriptedProvider([])
        self.usages: list[Usage] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        usage = Usage(input_tokens=500 + len(self.usages), output_tokens=60)
        self.usages.append(usage)
        return dataclasses.replace(await self._inner.complete(request), usage=usage)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_summary_counts_once_as_compaction(resources: Resources, tenant: str) -> None:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        items = ItemRepository(db, tenant)
        for n in range(40):
            text = f"message {n} " + "y " * 200
            await items.append(NewItem(sid, ItemKind.USER_MESSAGE, "user", f"{sid}:{n}", text=text))
    provider = _Recording()
    current = config_of("scripted", "m", "p", [], ContextBudget(context_tokens=4_000))
    acts = CompactionActivities(resources.sessions, provider, current)
    inp = CompactInput(str(sid), tenant, 7, f"{sid}:7:compact")
    env = ActivityEnvironment()
    # Racing attempts of one compaction (a retry while the first still ran): one summary...
    await asyncio.gather(*(env.run(acts.compact_session, inp) for _ in range(3)))
    assert provider.usages
    # ...and its usage once, as the provider reported it, under the compaction's key.
    rows = await _usage_rows(resources, tenant, str(sid))
    assert [(r.idempotency_key, r.purpose, r.agent, r.cost_usd) for r in rows] == [
        (inp.idempotency_key, "compaction", "default", None)
    ]
    assert (rows[0].input_tokens, rows[0].output_tokens) in {
        (u.input_tokens, u.output_tokens) for u in provider.usages
    }
