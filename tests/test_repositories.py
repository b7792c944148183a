"""Repositories against a real PostgreSQL: idempotent appends, ordinals, paging, tenant scoping,
artifact metadata, and the migration matching the ORM models."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from datetime import timedelta

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import func, select, text, update

from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.db import _alembic_config, migrate
from durable_agents.storage.errors import ArtifactNotFound, SessionNotFound
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.tool_effects import EffectState, ToolEffectRepository
from durable_agents.storage.turns import TurnRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.contracts import ArtifactRef
from tests.support.helpers import artifact_count
from tests.support.schema_diff import model_differences


async def new_session(res: Resources, tenant: str) -> uuid.UUID:
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={"m": 1})
    return sid


def msg(sid: uuid.UUID, key: str, text: str = "hi") -> NewItem:
    return NewItem(session_id=sid, kind="user_message", role="user", idempotency_key=key, text=text)


async def append(res: Resources, tenant: str, item: NewItem) -> tuple[ItemRow, bool]:
    async with res.sessions() as db, db.begin():
        return await ItemRepository(db, tenant).append(item)


async def ordinals(res: Resources, tenant: str, sid: uuid.UUID) -> list[int]:
    async with res.sessions() as db:
        return [r.ordinal for r in await ItemRepository(db, tenant).page(sid)]


async def rows_with_key(res: Resources, key: str) -> int:
    async with res.sessions() as db:
        stmt = select(func.count()).select_from(ItemRow).where(ItemRow.idempotency_key == key)
        return int(await db.scalar(stmt) or 0)


def fake_ref(res: Resources, tenant: str, content: bytes) -> ArtifactRef:
    sha = hashlib.sha256(content).hexdigest()
    return res.store.ref_for(tenant, sha, len(content), "text/plain")


async def test_append_with_same_key_twice_returns_the_first_row(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    key = f"{sid}:once"

    first, created_first = await append(resources, tenant, msg(sid, key, "first"))
    again, created_again = await append(resources, tenant, msg(sid, key, "retry"))

    assert (created_first, created_again) == (True, False)
    assert (again.id, again.ordinal, again.text) == (first.id, 1, "first")
    assert await rows_with_key(resources, key) == 1
    nxt, _ = await append(resources, tenant, msg(sid, f"{sid}:next"))
    assert nxt.ordinal == 2  # the retried append consumed no ordinal


async def test_sequential_appends_number_items_1_to_n_without_gaps(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    created = [(await append(resources, tenant, msg(sid, f"{sid}:{i}")))[0] for i in range(7)]

    assert [r.ordinal for r in created] == list(range(1, 8))
    assert await ordinals(resources, tenant, sid) == list(range(1, 8))


async def test_concurrent_appends_get_distinct_gapless_ordinals(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    items = [msg(sid, f"{sid}:c{i}", text=f"m{i}") for i in range(20)]

    results = await asyncio.gather(*(append(resources, tenant, it) for it in items))

    assert all(created for _, created in results)
    assert sorted(row.ordinal for row, _ in results) == list(range(1, 21))
    assert await ordinals(resources, tenant, sid) == list(range(1, 21))


async def race_same_key(
    res: Resources, tenant: str, sid: uuid.UUID, key: str
) -> tuple[tuple[ItemRow, bool], tuple[ItemRow, bool]]:
    """Append `key` in an open transaction; a second transaction appending it too passes its
    first by_key check (nothing committed yet) and waits on the session lock until we commit."""
    waiting = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
    async with res.sessions() as db, db.begin():
        first = await ItemRepository(db, tenant).append(msg(sid, key, "first"))
        second = asyncio.create_task(append(res, tenant, msg(sid, key, "second")))
        async with asyncio.timeout(10):
            while True:  # pg_stat_activity is snapshotted per transaction: ask in a fresh one
                async with res.engine.connect() as conn:
                    if await conn.scalar(waiting):
                        break
                await asyncio.sleep(0.02)
        assert not second.done()
    return first, await second


async def test_same_key_appended_from_two_open_transactions_yields_one_row(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    (mine, created_mine), (theirs, created_theirs) = await race_same_key(
        resources, tenant, sid, f"{sid}:race"
    )

    assert (created_mine, created_theirs) == (True, False)
    assert (theirs.id, theirs.text) == (mine.id, "first")
    assert await rows_with_key(resources, f"{sid}:race") == 1


async def test_losing_a_duplicate_race_consumes_no_ordinal(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    await race_same_key(resources, tenant, sid, f"{sid}:race")

    nxt, _ = await append(resources, tenant, msg(sid, f"{sid}:after"))
    assert nxt.ordinal == 2


async def test_same_key_appended_concurrently_many_times_creates_exactly_once(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    key = f"{sid}:burst"

    results = await asyncio.gather(*(append(resources, tenant, msg(sid, key)) for _ in range(10)))

    assert sum(created for _, created in results) == 1
    assert len({row.id for row, _ in results}) == 1
    assert await rows_with_key(resources, key) == 1


async def test_a_batch_append_skips_committed_keys_and_numbers_the_rest_in_order(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    first, _ = await append(resources, tenant, msg(sid, f"{sid}:task"))
    reply = NewItem(sid, "assistant_message", "assistant", f"{sid}:r", text="calling")
    call = NewItem(sid, "tool_call", "assistant", f"{sid}:r:call:1", tool_call_id="1")
    async with resources.sessions() as db, db.begin():
        batch = await ItemRepository(db, tenant).append_many([reply, call])
    assert [(r.ordinal, created) for r, created in batch] == [(2, True), (3, True)]
    assert batch[0][0].turn_id == batch[1][0].turn_id == first.turn_id

    # A retry after a partial commit: the committed key comes back, the rest is appended.
    late = NewItem(sid, "tool_call", "assistant", f"{sid}:r:call:2", tool_call_id="2")
    async with resources.sessions() as db, db.begin():
        again = await ItemRepository(db, tenant).append_many([reply, late])
    assert [(r.id, created) for r, created in again] == [
        (batch[0][0].id, False),
        (again[1][0].id, True),
    ]
    assert await ordinals(resources, tenant, sid) == [1, 2, 3, 4]

    other = await new_session(resources, tenant)
    async with resources.sessions() as db, db.begin():
        with pytest.raises(ValueError, match="one session"):
            await ItemRepository(db, tenant).append_many([reply, msg(other, f"{other}:x")])
    # The same key twice in one batch (a model repeating a tool call id) is one item.
    twice = NewItem(sid, "tool_call", "assistant", f"{sid}:r:call:3", tool_call_id="3")
    async with resources.sessions() as db, db.begin():
        pair = await ItemRepository(db, tenant).append_many([twice, twice])
    assert pair[0][0] is pair[1][0] and [c for _, c in pair] == [True, True]
    assert await ordinals(resources, tenant, sid) == [1, 2, 3, 4, 5]


async def test_page_returns_slices_after_the_cursor(resources: Resources, tenant: str) -> None:
    sid = await new_session(resources, tenant)
    for i in range(10):
        await append(resources, tenant, msg(sid, f"{sid}:{i}", text=f"m{i + 1}"))

    async with resources.sessions() as db:
        items = ItemRepository(db, tenant)
        assert [r.ordinal for r in await items.page(sid, limit=3)] == [1, 2, 3]
        assert [r.ordinal for r in await items.page(sid, after_ordinal=3, limit=3)] == [4, 5, 6]
        assert [r.text for r in await items.page(sid, after_ordinal=8)] == ["m9", "m10"]
        assert [r.ordinal for r in await items.page(sid, after_ordinal=9, limit=5)] == [10]
        assert await items.page(sid, after_ordinal=10) == []


async def test_waiting_or_quiet_lists_every_waiting_session_before_a_quiet_running_one(
    resources: Resources, tenant: str
) -> None:
    """The approvals inbox's read (workers/gateway/routes_sessions.py): a running session
    quiet for the window comes after every waiting one, however new; one changed within
    it, or of another status, not at all."""
    waiting = [await new_session(resources, tenant) for _ in range(2)]
    quiet, busy, done = [await new_session(resources, tenant) for _ in range(3)]
    async with resources.sessions() as db, db.begin():
        sessions = SessionRepository(db, tenant)
        for sid in waiting:
            await sessions.set_status(sid, "waiting_approval")
        for sid, status in ((quiet, "running"), (busy, "running"), (done, "completed")):
            await sessions.set_status(sid, status)
        old = func.now() - timedelta(minutes=5)
        for sid in (quiet, done):
            await db.execute(update(SessionRow).where(SessionRow.id == sid).values(updated_at=old))
    async with resources.sessions() as db:
        sessions = SessionRepository(db, tenant)
        window = timedelta(seconds=60)
        listed = [r.id for r in await sessions.waiting_or_quiet(limit=10, quiet_for=window)]
        assert listed == [waiting[1], waiting[0], quiet]
        first = await sessions.waiting_or_quiet(limit=2, quiet_for=window)
        assert [r.id for r in first] == [waiting[1], waiting[0]]


async def test_sessions_and_items_are_invisible_to_another_tenant(
    resources: Resources, tenant: str
) -> None:
    other = f"{tenant}-b"
    sid = await new_session(resources, tenant)
    key = f"{sid}:secret"
    await append(resources, tenant, msg(sid, key))

    async with resources.sessions() as db:
        assert await SessionRepository(db, tenant).find(sid) is not None  # control
        assert await SessionRepository(db, other).find(sid) is None
        with pytest.raises(SessionNotFound):
            await SessionRepository(db, other).get(sid)
        assert await SessionRepository(db, other).recent() == []
        assert await ItemRepository(db, other).page(sid) == []
        assert await ItemRepository(db, other).by_key(key) is None
    with pytest.raises(SessionNotFound):  # nor can the other tenant append to it
        await append(resources, other, msg(sid, f"{sid}:intruder"))
    assert await ordinals(resources, tenant, sid) == [1]


async def test_statements_built_once_bind_each_calls_own_tenant_and_session(
    resources: Resources, tenant: str
) -> None:
    """The hot statements are module-level objects shared by every call (storage/sessions.py):
    each call must still see its own tenant's rows only, and its own session's."""
    other = f"{tenant}-b"
    mine, theirs = await new_session(resources, tenant), await new_session(resources, other)
    for t, sid in ((tenant, mine), (other, theirs)):
        await append(resources, t, msg(sid, f"{sid}:ask"))  # opens the session's first turn
        call = NewItem(sid, "tool_call", "assistant", f"{sid}:call", tool_call_id="c1")
        await append(resources, t, call)
    async with resources.sessions() as db, db.begin():
        mine_items = await ItemRepository(db, tenant).for_tool_call(mine, "c1")
        assert [r.session_id for r in mine_items] == [mine]
        assert await ItemRepository(db, other).for_tool_call(mine, "c1") == []
        turn = await TurnRepository(db, tenant).latest(mine)
        assert turn is not None and mine_items[0].turn_id == turn.id  # joined the latest turn
        assert await TurnRepository(db, other).latest(mine) is None
        with pytest.raises(SessionNotFound):
            await SessionRepository(db, other).lock(mine)
        # One key in both tenants: two ledger rows, and settling one leaves the other alone.
        for t, sid in ((tenant, mine), (other, theirs)):
            claim = await ToolEffectRepository(db, t).claim_new(
                "k", session_id=sid, tool_call_id="c1", tool_name="write_file"
            )
            assert claim is not None and claim.fresh
        await ToolEffectRepository(db, other).settle("k", EffectState.COMPLETED)
        mine_effect = await ToolEffectRepository(db, tenant).get("k")
        theirs_effect = await ToolEffectRepository(db, other).get("k")
        assert mine_effect is not None and mine_effect.state == EffectState.STARTED
        assert theirs_effect is not None and theirs_effect.state == EffectState.COMPLETED
        await SessionRepository(db, tenant).set_status(mine, "running", workflow_run_id="run-1")
        await SessionRepository(db, tenant).set_status(mine, "completed")
    async with resources.sessions() as db:
        mine_row = await SessionRepository(db, tenant).get(mine)
        assert (mine_row.status, mine_row.workflow_run_id) == ("completed", "run-1")
        assert (await SessionRepository(db, other).get(theirs)).status != "completed"


async def test_artifact_of_one_tenant_is_not_found_under_another(
    resources: Resources, tenant: str
) -> None:
    other = f"{tenant}-b"
    ref = fake_ref(resources, tenant, b"private bytes")
    async with resources.sessions() as db, db.begin():
        artifact_id = await ArtifactRepository(db, tenant).register(ref, uri="s3://b/k")

    async with resources.sessions() as db:
        assert (await ArtifactRepository(db, tenant).get(artifact_id)).sha256 == ref.sha256
        with pytest.raises(ArtifactNotFound):
            await ArtifactRepository(db, other).get(artifact_id)
        assert await ArtifactRepository(db, other).get_many([artifact_id]) == {}
        with pytest.raises(ArtifactNotFound):  # registering someone else's ref is refused
            await ArtifactRepository(db, other).register(ref, uri="s3://b/k")


async def test_registering_the_same_bytes_twice_returns_one_artifact(
    resources: Resources, tenant: str
) -> None:
    other = f"{tenant}-b"
    content = b"shared bytes " + tenant.encode()
    sha = hashlib.sha256(content).hexdigest()

    ids: dict[str, set[uuid.UUID]] = {tenant: set(), other: set()}
    for owner in (tenant, other, tenant, other):
        async with resources.sessions() as db, db.begin():
            repo = ArtifactRepository(db, owner)
            ids[owner].add(await repo.register(fake_ref(resources, owner, content), uri="u"))

    assert len(ids[tenant]) == len(ids[other]) == 1
    assert ids[tenant] != ids[other]
    assert await artifact_count(resources, tenant, sha) == 1
    assert await artifact_count(resources, other, sha) == 1


async def test_add_ref_twice_is_idempotent_and_unknown_owner_type_is_rejected(
    resources: Resources, tenant: str
) -> None:
    async with resources.sessions() as db, db.begin():
        repo = ArtifactRepository(db, tenant)
        artifact_id = await repo.register(fake_ref(resources, tenant, b"ref me"), uri="u")
        for _ in range(2):
            await repo.add_ref(
                artifact_id, owner_type="checkpoint", owner_id="s-1", required_for_resume=True
            )
        with pytest.raises(ValueError, match="owner_type"):
            await repo.add_ref(
                artifact_id, owner_type="whatever", owner_id="s-1", required_for_resume=False
            )

    async with resources.sessions() as db:
        refs = await ArtifactRepository(db, tenant).refs_of(artifact_id)
    assert [(r.owner_type, r.owner_id, r.required_for_resume) for r in refs] == [
        ("checkpoint", "s-1", True)
    ]


async def test_set_status_rejects_unknown_status_and_missing_session(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    async with resources.sessions() as db, db.begin():
        sessions = SessionRepository(db, tenant)
        with pytest.raises(ValueError, match="status"):
            await sessions.set_status(sid, "exploded")
        with pytest.raises(SessionNotFound):
            await sessions.set_status(uuid.uuid4(), "running")
        with pytest.raises(SessionNotFound):
            await SessionRepository(db, f"{tenant}-b").set_status(sid, "failed")
        await sessions.set_status(sid, "running")

    async with resources.sessions() as db:
        assert (await SessionRepository(db, tenant).get(sid)).status == "running"


async def test_migrating_again_is_a_no_op_and_models_match_the_schema(
    resources: Resources, migrated: StackEndpoints, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    owner_url = migrated.database_migration_url
    head = ScriptDirectory.from_config(_alembic_config(owner_url)).get_current_head()

    await migrate(owner_url)

    async with resources.engine.connect() as conn:
        versions = list(await conn.scalars(text("SELECT version_num FROM alembic_version")))
        differences = await conn.run_sync(model_differences)
    async with resources.sessions() as db:
        assert await db.get(SessionRow, (tenant, sid)) is not None  # data survived the second run
    assert versions == [head]
    assert differences == []
