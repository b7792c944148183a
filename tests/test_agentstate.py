"""AgentState as a service: turns keep their config, compaction, the session tree."""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Replayer

from durable_agents.activities.compaction import CompactionActivities
from durable_agents.activities.context.assembly import ContextBudget, tool_tokens
from durable_agents.activities.context.model_context import config_of
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.compactions import CompactionRepository
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.turns import TurnRepository
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import ArtifactRef, CompactInput
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import files_to_read, items_of, session_root, start, wait_for_pending
from tests.support.plan_db import (  # noqa: F401 (the `plan_db` fixture)
    PlanDb,
    analyze_items,
    plan_database,
)
from tests.test_tool_call_index import _long_session


async def test_a_turn_resumed_after_a_config_change_uses_its_recorded_config(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    script = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a", "content": "a"}}]}]
    queue = f"cfg-{uuid.uuid4().hex[:8]}"
    old = ScriptedProvider.from_data(script)
    async with agent_worker(old, workspace, queue=queue, system_prompt="prompt v1", name="m-1"):
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, session_id)
    # A new deploy: another prompt and model. The turn under way must not notice.
    new = ScriptedProvider.from_data(script)
    async with agent_worker(new, workspace, queue=queue, system_prompt="prompt v2", name="m-2"):
        await verbs.approve(
            client, session_id, call, "test", sessions=resources.sessions, tenant_id=tenant
        )
        await asyncio.wait_for(handle.result(), 30)

    assert old.requests[0].model == "m-1" and old.requests[0].messages[0].content == "prompt v1"
    resumed = new.requests[0]
    assert resumed.model == "m-1"
    assert resumed.messages[0].content == "prompt v1"
    async with resources.sessions() as db:
        turns = await TurnRepository(db, tenant).for_session(uuid.UUID(session_id))
    assert len(turns) == 1 and turns[0].context_config_id is not None


async def test_follow_up_opens_a_new_turn_that_records_the_current_config(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a", "content": "a"}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, session_id)
        await verbs.send_message(client, resources.sessions, tenant, session_id, "and then?")
        await verbs.approve(
            client, session_id, call, "test", sessions=resources.sessions, tenant_id=tenant
        )
        await asyncio.wait_for(handle.result(), 30)
    items = await items_of(resources, tenant, session_id)
    async with resources.sessions() as db:
        turns = await TurnRepository(db, tenant).for_session(uuid.UUID(session_id))
    assert [t.turn_no for t in turns] == [1, 2]
    follow_up = next(i for i in items if i.text == "and then?")
    assert follow_up.turn_id == turns[1].id and turns[1].first_ordinal == follow_up.ordinal
    assert all(i.turn_id is not None for i in items)


async def test_long_session_compacts_and_assembly_starts_from_the_summary(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid, script = files_to_read(workspace, tenant, 8)
    provider = ScriptedProvider.from_data(script)
    # Small enough that the previews alone pass the compaction threshold after a few steps,
    # the built-in tools' schemas, which every prompt holds, counted in.
    budget = {"context_tokens": 4_200, "reply_tokens": 500, "tool_result_tokens": 1_500}
    async with agent_worker(provider, workspace, **budget) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, continue_as_new_every=3
        )
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed" and result.steps == 9
    async with resources.sessions() as db:
        versions = await CompactionRepository(db, tenant).for_session(uuid.UUID(session_id))
    assert versions, "expected at least one compaction"
    assert [v.version for v in versions] == list(range(1, len(versions) + 1))
    for older, newer in itertools.pairwise(versions):
        assert newer.previous_compaction_id == older.id
        assert newer.covers_through_ordinal > older.covers_through_ordinal
    # Compactions run beside the next model call (workflows/compactions.py): the last call
    # started from the latest one committed by then.
    last = provider.requests[-1]
    used = next(
        v for v in reversed(versions) if f"compaction v{v.version}," in last.messages[0].content
    )
    assert used.summary in last.messages[0].content
    # Items covered by the summary are not in the model's input any more...
    items = await items_of(resources, tenant, session_id)
    compacted_calls = {
        i.tool_call_id
        for i in items
        if i.kind == "tool_call" and i.ordinal <= used.covers_through_ordinal
    }
    seen_calls = {m.tool_call_id for m in last.messages if m.role == "tool"}
    assert compacted_calls and not compacted_calls & seen_calls
    # ...but they are all still there.
    assert len([i for i in items if i.kind == "tool_result"]) == 8

    # The last run (after continue-as-new) compacted too, and replays deterministically.
    history = await client.get_workflow_handle(handle.id).fetch_history()
    assert "compact_session" in history.to_json()
    replay = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replay.replay_failure is None
    if os.environ.get("RECORD_HISTORIES"):
        (Path(__file__).parent / "histories" / "compaction.json").write_text(history.to_json())


async def test_expanded_results_filling_the_window_do_not_make_a_compaction_due(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Expansion fills whatever room the previews leave, so the input is near the budget on
    # every step; compacting on that would summarise (a model call) after every tool call.
    sid = uuid.uuid4()
    for n in range(3):
        (session_root(workspace, tenant, sid) / f"big{n}.txt").write_text(f"big {n} " * 2_000)
    provider = ScriptedProvider.from_data(
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": f"big{n}.txt"}}]}
            for n in range(3)
        ]
    )
    reads: Counter[str] = Counter()
    for name in ("get", "get_range"):
        real = getattr(resources.store, name)

        async def counted(tenant_id: str, ref: ArtifactRef, *a: int, _real: Any = real) -> bytes:
            reads[ref.sha256] += 1
            return bytes(await _real(tenant_id, ref, *a))

        monkeypatch.setattr(resources.store, name, counted)
    budget = {"context_tokens": 6_000, "reply_tokens": 500, "tool_result_tokens": 1_500}
    async with agent_worker(provider, workspace, **budget) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    # Every step re-expands the newest results, yet none is read back from S3: run_tool
    # left each committed result in the worker's read cache for the steps after it.
    assert not reads
    items = await items_of(resources, tenant, session_id)
    last = [i for i in items if i.kind == "assistant_message"][-1].data["context"]
    assert last["expanded"] >= 2
    # Near the room the tool schemas and the reply leave (every tool added shrinks it).
    tools = tool_tokens(default_registry().specs(), ContextBudget().encoding)
    room = budget["context_tokens"] - budget["reply_tokens"] - tools
    assert last["input_tokens"] >= 0.9 * room
    assert last["preview_tokens"] < 0.75 * budget["context_tokens"] / 2
    async with resources.sessions() as db:
        versions = await CompactionRepository(db, tenant).for_session(uuid.UUID(session_id))
    assert versions == []
    history = await client.get_workflow_handle(handle.id).fetch_history()
    assert "compact_session" not in history.to_json()


async def test_compaction_retried_after_a_crash_is_stored_once(
    resources: Resources, tenant: str
) -> None:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
    from durable_agents.storage.items import ItemRepository, NewItem

    async with resources.sessions() as db, db.begin():
        items = ItemRepository(db, tenant)
        for n in range(40):
            await items.append(
                NewItem(
                    sid, "user_message", "user", f"{sid}:{n}", text=f"message {n} " + "y " * 200
                )
            )
    provider = ScriptedProvider([])
    current = config_of("scripted", "m", "p", [], ContextBudget(context_tokens=4_000))
    acts = CompactionActivities(resources.sessions, provider, current)
    inp = CompactInput(str(sid), tenant, 7, f"{sid}:7:compact")
    env = ActivityEnvironment()
    first, again, racing = await asyncio.gather(
        env.run(acts.compact_session, inp),
        env.run(acts.compact_session, inp),
        env.run(acts.compact_session, inp),
    )
    assert first is not None and first == again == racing
    async with resources.sessions() as db:
        stored = await CompactionRepository(db, tenant).for_session(sid)
    assert len(stored) == 1 and stored[0].version == 1


async def test_session_tree_links_children_to_parent_and_root_within_a_tenant(
    resources: Resources, tenant: str
) -> None:
    root, child, grandchild = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        repo = SessionRepository(db, tenant)
        await repo.create(root, title="root", model_config={})
        await repo.create(
            child, title="child", model_config={}, parent_id=root, agent_name="researcher"
        )
        await repo.create(grandchild, title="gc", model_config={}, parent_id=child)
    async with resources.sessions() as db:
        repo = SessionRepository(db, tenant)
        tree = await repo.tree(root)
        assert {s.id for s in tree} == {root, child, grandchild}
        assert {s.root_id for s in tree} == {root}
        assert [s.id for s in await repo.children(root)] == [child]
        assert (await repo.get(child)).agent_name == "researcher"
        other = SessionRepository(db, f"{tenant}-other")
        assert await other.tree(root) == []
        with pytest.raises(SessionNotFound):
            await other.get(child)
    async with resources.sessions() as db, db.begin():
        with pytest.raises(SessionNotFound):
            await SessionRepository(db, f"{tenant}-other").create(
                uuid.uuid4(), title="x", model_config={}, parent_id=root
            )


async def test_agent_remembers_across_sessions_and_another_tenant_recalls_nothing(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    remember = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "remember", "arguments": {"content": "deploys on Fridays"}}]}]
    )
    recall = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "recall", "arguments": {"query": "fridays"}}]}]
    )
    async with agent_worker(remember, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant)
        await asyncio.wait_for(handle.result(), 30)
    async with agent_worker(recall, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant)
        await asyncio.wait_for(handle.result(), 30)
    told = next(m for m in recall.requests[1].messages if m.role == "tool")
    assert "deploys on Fridays" in told.content
    async with agent_worker(recall, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=f"{tenant}-other")
        await asyncio.wait_for(handle.result(), 30)
    told = next(m for m in recall.requests[-1].messages if m.role == "tool")
    assert "deploys on Fridays" not in told.content


async def test_turns_and_compactions_of_another_tenant_look_missing(
    resources: Resources, tenant: str
) -> None:
    from durable_agents.storage.items import ItemRepository, NewItem

    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        await ItemRepository(db, tenant).append(NewItem(sid, "user_message", "user", f"{sid}:0"))
        await CompactionRepository(db, tenant).add(
            sid,
            covers_through_ordinal=1,
            summary="s",
            summary_tokens=1,
            model="m",
            idempotency_key=f"{sid}:c",
        )
    other = f"{tenant}-other"
    async with resources.sessions() as db:
        assert len(await TurnRepository(db, tenant).for_session(sid)) == 1
        assert await TurnRepository(db, other).for_session(sid) == []
        assert await TurnRepository(db, other).latest(sid) is None
        assert await CompactionRepository(db, other).latest(sid) is None
        assert await CompactionRepository(db, other).by_key(f"{sid}:c") is None
        assert await ItemRepository(db, other).page(sid) == []


async def test_paging_a_long_session_is_an_index_scan(plan_db: PlanDb, tenant: str) -> None:
    from sqlalchemy import text

    resources = plan_db
    sid = await _long_session(resources, tenant)
    await analyze_items(resources)
    async with resources.engine.connect() as conn:
        await conn.execute(text("SET enable_seqscan = off"))  # small test tables favour seq scans
        plan = "\n".join(
            await conn.scalars(
                text(
                    "EXPLAIN SELECT * FROM items WHERE session_id = :s AND tenant_id = :t"
                    " AND ordinal > 1000 ORDER BY ordinal LIMIT 200"
                ),
                {"s": sid, "t": tenant},
            )
        )
    assert "uq_items_session_ordinal" in plan and "Sort" not in plan
