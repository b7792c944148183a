"""The effects ledger on the real database: its states, and run_tool honouring each
tool's effect (an interrupted effectful call is reconciled or reported in doubt, never
re-run silently)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
    TransientToolError,
)
from durable_agents.storage.tool_effects import EffectState, ToolEffectRepository
from durable_agents.workers.resources import Resources
from tests.support.effect_tools import bump_tool, executions
from tests.support.tool_calls import claim, ledger_state, new_call, result_of, run
from tests.test_vocabulary import constraint_values


def activities(res: Resources, workspace: Path, *tools: Tool) -> ToolActivities:
    return ToolActivities(res.sessions, res.store, ToolRegistry.of(tools), workspace=workspace)


# --- the ledger's states -----------------------------------------------------------------


async def test_ledger_claim_release_settle_states(resources: Resources, tenant: str) -> None:
    sid = uuid.uuid4()
    key = f"{sid}:0:c"
    async with resources.sessions() as db, db.begin():
        repo = ToolEffectRepository(db, tenant)
        args = {"session_id": sid, "tool_call_id": "c", "tool_name": "bump"}
        first = await repo.claim(key, **args)
        again = await repo.claim(key, **args)
        await repo.release(key)
        after_release = await repo.claim(key, **args)
        await repo.settle(key, "completed")
        other_tenant = await ToolEffectRepository(db, f"{tenant}-other").claim(key, **args)
        row = await repo.get(key)
        after_settle = await repo.claim(key, **args)
    assert (first.fresh, first.found, first.attempt) == (True, None, 1)
    assert (again.fresh, again.found, again.attempt) == (False, "started", 2)
    assert (after_release.fresh, after_release.found, after_release.attempt) == (
        True,
        "retrying",
        3,
    )
    assert row is not None and row.state == "completed" and row.settled_at is not None
    assert (after_settle.fresh, after_settle.found) == (False, "completed")
    assert other_tenant.fresh, "another tenant's key is another call"


async def test_concurrent_claims_of_one_key_tell_only_one_it_is_first(
    resources: Resources, tenant: str
) -> None:
    key = f"{uuid.uuid4()}:0:c"

    async def one() -> bool:
        async with resources.sessions() as db, db.begin():
            got = await ToolEffectRepository(db, tenant).claim(
                key, session_id=uuid.uuid4(), tool_call_id="c", tool_name="bump"
            )
            await asyncio.sleep(0.05)  # hold the claim open while the others try
            return got.fresh

    assert sorted(await asyncio.gather(*(one() for _ in range(4)))) == [False, False, False, True]


# --- run_tool and the effects contract ---------------------------------------------------


async def test_effectful_call_is_ledgered_and_settled_with_its_result(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    acts = activities(resources, tmp_path, bump_tool(count))
    inp = await new_call(resources, tenant, "bump")
    outcome = await run(acts, inp)
    again = await run(acts, inp)  # a retry after the commit: the committed result
    assert executions(count) == {inp.idempotency_key: 1}
    assert await ledger_state(resources, inp) == ("completed", 1)
    assert (await result_of(resources, inp))["effect"] == "completed"
    assert not outcome.in_doubt and again.item_id == outcome.item_id


async def test_interrupted_call_without_reconcile_is_in_doubt_and_not_rerun(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    acts = activities(resources, tmp_path, bump_tool(count))
    inp = await new_call(resources, tenant, "bump")
    await claim(resources, inp)
    outcome = await run(acts, inp)
    assert executions(count) == {}, "an interrupted effectful call ran again silently"
    assert outcome.in_doubt and outcome.error_type == "EffectInDoubt"
    assert await ledger_state(resources, inp) == ("in_doubt", 2)
    result = await result_of(resources, inp)
    assert result["effect"] == "in_doubt"
    assert "may or may not have taken effect" in result["text"]


async def test_interrupted_call_is_reconciled_when_its_effect_happened(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    acts = activities(resources, tmp_path, bump_tool(count, reconciles=True))
    inp = await new_call(resources, tenant, "bump")
    await claim(resources, inp)
    count.write_text(f"{inp.idempotency_key}\n")  # the dead attempt's effect
    outcome = await run(acts, inp)
    assert executions(count) == {inp.idempotency_key: 1}
    assert not outcome.in_doubt and outcome.ref is not None
    assert await ledger_state(resources, inp) == ("reconciled", 2)
    result = await result_of(resources, inp)
    assert result["effect"] == "reconciled" and '"how": "reconciled"' in result["text"]


async def test_interrupted_call_runs_when_reconcile_says_it_did_not_happen(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    acts = activities(resources, tmp_path, bump_tool(count, reconciles=True))
    inp = await new_call(resources, tenant, "bump")
    await claim(resources, inp)  # died after the claim, before the effect
    await run(acts, inp)
    assert executions(count) == {inp.idempotency_key: 1}
    assert await ledger_state(resources, inp) == ("completed", 2)


async def test_read_only_and_idempotent_tools_are_not_ledgered(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    async def look(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        return ToolOutput(b"seen")

    spec = ToolSpec("look", "Look.", {"type": "object"})
    for effect in ("read_only", "idempotent"):
        acts = activities(resources, tmp_path, Tool(spec, look, effect=effect))  # type: ignore[arg-type]
        inp = await new_call(resources, tenant, "look")
        await run(acts, inp)
        assert await ledger_state(resources, inp) is None


async def test_tool_errors_settle_as_failed_and_transient_ones_release_the_claim(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    runs: list[str] = []

    async def flaky(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        runs.append(ctx.idempotency_key)
        if len(runs) == 1:
            raise TransientToolError("HTTP 503")  # the tool says: nothing happened
        raise ToolError("Refused", "the far side said no")

    acts = activities(resources, tmp_path, Tool(ToolSpec("flaky", "F.", {"type": "object"}), flaky))
    inp = await new_call(resources, tenant, "flaky")
    with pytest.raises(TransientToolError):
        await run(acts, inp)
    assert await ledger_state(resources, inp) == ("retrying", 1)
    outcome = await run(acts, inp)  # Temporal's retry: runs again, not in doubt
    assert len(runs) == 2 and outcome.error_type == "Refused" and not outcome.in_doubt
    assert await ledger_state(resources, inp) == ("failed", 2)


@contextmanager
def counted_statements(res: Resources) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement.split(None, 1)[0].upper())

    def commit(conn: Any) -> None:
        seen.append("COMMIT")

    engine = res.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    event.listen(engine, "commit", commit)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)
        event.remove(engine, "commit", commit)


async def test_ledger_costs_one_claim_transaction_and_one_update_per_effectful_call(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    async def same(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        return ToolOutput(b"same output")

    costs: dict[str, list[str]] = {}
    for effect in ("read_only", "effectful"):
        tool = Tool(ToolSpec("same", "S.", {"type": "object"}), same, effect=effect)  # type: ignore[arg-type]
        acts = activities(resources, tmp_path, tool)
        inp = await new_call(resources, tenant, "same")
        await run(acts, inp)  # warm: the artifact row exists, both calls then cost alike
        inp = await new_call(resources, tenant, "same")
        with counted_statements(resources) as seen:
            await run(acts, inp)
        costs[effect] = seen
    extra = len(costs["effectful"]) - len(costs["read_only"])
    print(f"ledger cost: read_only {costs['read_only']}\n effectful {costs['effectful']}")
    # The claim (INSERT ... ON CONFLICT DO NOTHING, committed by itself: an autocommit unit),
    # then one UPDATE with the result's commit: two more statements, no more transactions.
    assert extra == 2, costs
    assert costs["effectful"].count("COMMIT") == costs["read_only"].count("COMMIT")


async def test_ledger_rows_are_the_tenants_own(resources: Resources, tenant: str) -> None:
    key = f"{uuid.uuid4()}:0:c"
    async with resources.sessions() as db, db.begin():
        await ToolEffectRepository(db, tenant).claim(
            key, session_id=uuid.uuid4(), tool_call_id="c", tool_name="bump"
        )
    async with resources.sessions() as db:
        assert await ToolEffectRepository(db, f"{tenant}-other").get(key) is None
        assert await ToolEffectRepository(db, tenant).get(key) is not None


async def test_a_call_another_attempt_settled_meanwhile_is_not_run(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    # The race: this attempt found no result, then another attempt ran the call and settled
    # it before this one claimed it. The ledger says settled: nothing runs again.
    count = tmp_path / "count"
    acts = activities(resources, tmp_path, bump_tool(count, reconciles=True))
    inp = await new_call(resources, tenant, "bump")
    await claim(resources, inp)
    async with resources.sessions() as db, db.begin():
        await ToolEffectRepository(db, tenant).settle(inp.idempotency_key, "completed")
    await run(acts, inp)
    assert executions(count) == {}


async def test_the_state_constraint_holds_exactly_the_enum_values(resources: Resources) -> None:
    assert await constraint_values(resources, "ck_tool_effects_state") == set(EffectState)
