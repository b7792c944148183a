"""Forks in AgentState, over seeded random sessions on the real PostgreSQL and S3.

Properties: forking (and writing the fork's own items) leaves every row of the parent as it
was; a fork reads its parent's items up to the fork point (a fork of a fork, its
grandparent's too), in ordinal order, and its own after; a fork with an edited result reads
it in the original's place, once, and the rest as its parent committed it; and no archive,
item removal or GC pass takes an item or object a fork reads."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Table, select

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.archive import (
    SessionNotArchivable,
    archive_session,
    rehydrate_session,
)
from durable_agents.storage.errors import SessionNotFound, SessionShared
from durable_agents.storage.fork_edits import carried_items, result_edits
from durable_agents.storage.forks import NotForkable, create_fork, fork_point
from durable_agents.storage.gc import collect
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import Base, ItemRow
from durable_agents.storage.tool_results import ToolResult, VerifiedArtifact, commit_tool_result
from durable_agents.storage.user_messages import StagedText, stage_user_text
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources

SEEDS = range(6)
# An edited result over this is stored as an object, as a long user message is.
EDIT_INLINE_BYTES = 64
WINDOW = timedelta(hours=1)
TABLES = Base.metadata.tables
# The rows of a session, by the column that names it.
SESSION_ROWS: tuple[tuple[str, str], ...] = (
    ("sessions", "id"),
    ("items", "session_id"),
    ("turns", "session_id"),
    ("compactions", "session_id"),
    ("agent_artifact_refs", "owner_id"),
    ("tool_effects", "session_id"),
    ("session_archives", "session_id"),
)


async def rows_of(res: Resources, tenant: str, sid: uuid.UUID) -> dict[str, list[dict[str, Any]]]:
    """Every row of the session, every column, in a stable order."""
    found: dict[str, list[dict[str, Any]]] = {}
    async with res.sessions() as db:
        for name, column in SESSION_ROWS:
            table: Table = TABLES[name]
            key = str(sid) if name == "agent_artifact_refs" else sid
            result = await db.execute(
                select(table).where(table.c.tenant_id == tenant, table.c[column] == key)
            )
            found[name] = sorted(
                (dict(r._mapping) for r in result), key=lambda r: sorted(map(str, r.items()))
            )
    return found


class World:
    """A tenant's sessions and forks, written as the loop writes them."""

    def __init__(self, res: Resources, tenant: str, rng: random.Random) -> None:
        self.res, self.tenant, self.rng = res, tenant, rng
        self.blobs = [f"result {n} ".encode() * (40 + n) for n in range(5)]
        self.forks: dict[uuid.UUID, uuid.UUID] = {}  # fork -> the session it forked
        self.edited: dict[uuid.UUID, str] = {}  # fork -> the call whose result it edited

    async def item(self, sid: uuid.UUID, kind: str, role: str, key: str, **kw: Any) -> None:
        async with agent_state(self.res.sessions, self.tenant, write=True) as st:
            await st.items.append(NewItem(sid, kind, role, key, **kw))

    async def steps(self, sid: uuid.UUID, first: int, count: int) -> None:
        """`count` model steps from `first`: a reply, a call and its stored result each."""
        for step in range(first, first + count):
            key = f"{sid}:{step}"
            await self.item(
                sid,
                ItemKind.ASSISTANT_MESSAGE,
                "assistant",
                f"{key}:model",
                text=f"step {step}",
                data={"step": step},
            )
            call = f"call_{step}_0"
            await self.item(
                sid,
                ItemKind.TOOL_CALL,
                "assistant",
                f"{key}:{call}:call",
                tool_call_id=call,
                tool_name="read_file",
                data={"step": step, "arguments": {}},
            )
            data = self.rng.choice(self.blobs)  # the same bytes recur: shared objects
            ref = await self.res.store.put(self.tenant, data, "text/plain")
            async with self.res.sessions() as db, db.begin():
                await commit_tool_result(
                    db,
                    self.tenant,
                    ToolResult(
                        sid,
                        call,
                        "read_file",
                        step,
                        f"{key}:{call}",
                        artifact=VerifiedArtifact(ref, data),
                    ),
                    store=self.res.store,
                )
            if self.rng.random() < 0.3:
                await self.item(sid, ItemKind.USER_MESSAGE, "user", f"{key}:user", text="more")

    async def task(self) -> uuid.UUID:
        sid = uuid.uuid4()
        async with agent_state(self.res.sessions, self.tenant, write=True) as st:
            await st.sessions.create(sid, title="task", model_config={})
        await self.item(sid, ItemKind.USER_MESSAGE, "user", f"{sid}:task", text="do it")
        await self.steps(sid, 0, self.rng.randint(2, 7))
        if self.rng.random() < 0.5:
            async with agent_state(self.res.sessions, self.tenant, write=True) as st:
                await st.compactions.add(
                    sid,
                    covers_through_ordinal=self.rng.randint(2, 6),
                    summary="so far",
                    summary_tokens=2,
                    model="m",
                    idempotency_key=f"{sid}:compact",
                )
        await self.end(sid)
        return sid

    async def end(self, sid: uuid.UUID) -> None:
        async with agent_state(self.res.sessions, self.tenant, write=True) as st:
            await st.sessions.set_status(sid, "completed")

    async def steps_of(self, sid: uuid.UUID) -> list[int]:
        async with agent_state(self.res.sessions, self.tenant) as st:
            rows = await st.items.page(sid)
        return [r.data["step"] for r in rows if r.kind == ItemKind.ASSISTANT_MESSAGE]

    async def fork(self, parent: uuid.UUID) -> uuid.UUID:
        step = self.rng.choice(await self.steps_of(parent))
        fork_id = uuid.uuid4()
        said = "try another way" if self.rng.random() < 0.5 else None
        staged = None if said is None else await stage_user_text(None, self.tenant, said, 4096)
        # Half the forks past step 0 edit the result their step reads: inline or, when
        # long, as an object of its own.
        texts: dict[str, StagedText] = {}
        if step > 0 and self.rng.random() < 0.5:
            text = "edited " * self.rng.choice([1, 40])
            texts[f"call_{step - 1}_0"] = await stage_user_text(
                self.res.store, self.tenant, text, EDIT_INLINE_BYTES
            )
        async with agent_state(self.res.sessions, self.tenant, write=True) as st:
            point = await fork_point(st, parent, step)
            carried: list[NewItem] = []
            if texts:
                edits = await result_edits(st, point, texts)
                carried = await carried_items(
                    st,
                    edits,
                    texts,
                    fork_id=fork_id,
                    workflow_id=f"agent-{fork_id}",
                    store=self.res.store,
                )
                point = edits.point
            await create_fork(
                st,
                point,
                fork_id,
                workflow_id=f"agent-{fork_id}",
                agent_definition="default",
                model_config={},
                approvals=None,
                instruction=staged,
                carried=carried,
            )
        await self.steps(fork_id, step, self.rng.randint(1, 3))
        await self.end(fork_id)
        self.forks[fork_id] = parent
        if texts:
            self.edited[fork_id] = next(iter(texts))
        return fork_id

    async def page(self, sid: uuid.UUID) -> list[ItemRow]:
        async with agent_state(self.res.sessions, self.tenant) as st:
            return await st.items.page(sid)

    async def forked_at(self, sid: uuid.UUID) -> int:
        async with agent_state(self.res.sessions, self.tenant) as st:
            at = (await st.sessions.get(sid)).forked_at
        assert at is not None
        return at


async def check_reads(world: World, fork_id: uuid.UUID) -> None:
    parent = world.forks[fork_id]
    at = await world.forked_at(fork_id)
    mine, theirs = await world.page(fork_id), await world.page(parent)
    ordinals = [r.ordinal for r in mine]
    assert ordinals == sorted(set(ordinals))
    # The shared part is the parent's rows themselves (same ids), nothing copied.
    assert [r.id for r in mine if r.ordinal <= at] == [r.id for r in theirs if r.ordinal <= at]
    assert all(r.session_id == fork_id for r in mine if r.ordinal > at)
    # The parent's reply at the fork step is the first thing the fork does not share, or,
    # with an edited result, that result: the fork carries what follows it up to the reply.
    assert theirs[at].ordinal == at + 1
    edited = world.edited.get(fork_id)
    if edited is None:
        assert theirs[at].kind == ItemKind.ASSISTANT_MESSAGE
    else:
        assert (theirs[at].kind, theirs[at].tool_call_id) == (ItemKind.TOOL_RESULT, edited)
        reply = next(r for r in theirs[at:] if r.kind == ItemKind.ASSISTANT_MESSAGE)
        tail = theirs[at : reply.ordinal - 1]
        carried = mine[at : at + len(tail)]
        assert [_content(r) for r in carried[1:]] == [_content(r) for r in tail[1:]]
        assert (carried[0].tool_call_id, carried[0].data["edited"]) == (edited, True)
        assert carried[0].text.startswith("edited")
    # Each call has one result in the fork: the edited one in place of its parent's.
    results = Counter(r.tool_call_id for r in mine if r.kind == ItemKind.TOOL_RESULT)
    assert set(results.values()) == {1}
    async with agent_state(world.res.sessions, world.tenant) as st:
        for row in (r for r in mine if r.tool_call_id and r.ordinal <= at):
            thread = await st.calls.thread(fork_id, row.tool_call_id)
            assert thread is not None
            assert thread.call.session_id in {parent, *world.forks, *world.forks.values()}
        compaction = await st.compactions.latest(fork_id)
        window = await st.items.window(fork_id, after_ordinal=0, token_budget=10**9)
    assert [r.id for r in window] == [r.id for r in mine]
    if compaction is not None:
        assert compaction.covers_through_ordinal <= at or compaction.session_id == fork_id


def _content(row: ItemRow) -> tuple[Any, ...]:
    """What an item says, wherever it is."""
    return (row.kind, row.role, row.text, row.tool_call_id, row.data, row.artifact_id)


@pytest.mark.parametrize("seed", SEEDS)
async def test_forks_never_change_their_parent_and_gc_keeps_what_they_read(
    resources: Resources, seed: int
) -> None:
    tenant = f"t-fork-{seed}-{uuid.uuid4().hex[:6]}"
    world = World(resources, tenant, random.Random(seed))
    parent = await world.task()
    before = await rows_of(resources, tenant, parent)
    first = await world.fork(parent)
    second = await world.fork(world.rng.choice([parent, first]))  # a fork of a fork, or not
    third = await world.fork(second)
    assert await rows_of(resources, tenant, parent) == before
    for fork_id in (first, second, third):
        await check_reads(world, fork_id)

    # What shares its items stays hot; a removal of them is refused; a leaf fork archives.
    shared = {world.forks[f] for f in world.forks}
    for sid in shared:
        with pytest.raises(SessionNotArchivable, match="shares its items"):
            await archive_session(resources.sessions, resources.store, tenant, sid)
        with pytest.raises(SessionShared):
            async with agent_state(resources.sessions, tenant, write=True) as st:
                await st.external.remove_last(sid)
    leaves = [f for f in world.forks if f not in shared]
    for leaf in leaves:
        await archive_session(resources.sessions, resources.store, tenant, leaf)
    # GC far in the future, twice: marked, then swept past the window.
    later = datetime.now(UTC) + timedelta(days=30)
    for now in (later, later + 2 * WINDOW):
        await collect(resources.sessions, resources.store, now=now, window=WINDOW, tenant_id=tenant)
    assert await rows_of(resources, tenant, parent) == before
    for leaf in leaves:  # back from the cold tier, it reads the same conversation
        await rehydrate_session(resources.sessions, resources.store, tenant, leaf)
    for fork_id in world.forks:
        await check_reads(world, fork_id)
        async with agent_state(resources.sessions, tenant) as st:
            for row in await st.items.page(fork_id):
                if row.artifact_id is None:
                    continue
                art = await st.artifacts.get(row.artifact_id)
                ref = resources.store.ref_for(tenant, art.sha256, art.size_bytes, art.content_type)
                assert await resources.store.get(tenant, ref)  # verified against its sha256


async def test_a_fork_point_must_be_a_step_of_the_session_and_a_refusal_writes_nothing(
    resources: Resources, tenant: str
) -> None:
    world = World(resources, tenant, random.Random(7))
    parent = await world.task()
    steps = await world.steps_of(parent)
    before = await rows_of(resources, tenant, parent)
    fork_id = uuid.uuid4()
    for step, words in (
        (max(steps) + 1, f"has no step {max(steps) + 1} \\(steps 0 to {max(steps)}\\)"),
        (-1, "has no step -1"),
    ):
        with pytest.raises(NotForkable, match=words):
            async with agent_state(resources.sessions, tenant, write=True) as st:
                await fork_point(st, parent, step)
    with pytest.raises(SessionNotFound):  # another tenant's session is a missing one
        async with agent_state(resources.sessions, f"{tenant}-x", write=True) as st:
            await fork_point(st, parent, steps[0])
    assert await rows_of(resources, tenant, parent) == before
    assert (await rows_of(resources, tenant, fork_id))["sessions"] == []
    await archive_session(resources.sessions, resources.store, tenant, parent)
    with pytest.raises(NotForkable, match="archived; restore it first"):
        async with agent_state(resources.sessions, tenant, write=True) as st:
            await fork_point(st, parent, steps[0])
