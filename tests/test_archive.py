"""The cold tier on real PostgreSQL and S3: exact round trips, and never a half-done state."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context.model_context import config_of
from durable_agents.storage.archive import (
    ArchiveConflict,
    ArchiveResult,
    SessionNotArchivable,
    archive_idle_sessions,
    archive_session,
    ensure_hot,
    rehydrate_session,
)
from durable_agents.storage.archive_snapshot import HOT, TABLES, decode
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.compactions import CompactionRepository
from durable_agents.storage.context_configs import ContextConfigRepository
from durable_agents.storage.errors import SessionArchived, SessionNotFound
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import SessionArchiveRow, SessionRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.turns import TurnRepository
from durable_agents.workers.client import tasks
from durable_agents.workers.client.session_view import load_view, render_view
from durable_agents.workers.resources import Resources
from tests.support.helpers import s3_keys


def _item(sid: uuid.UUID, n: int, artifacts: list[tuple[uuid.UUID, str, int]]) -> NewItem:
    key = f"{sid}:{n}"
    if n % 20 == 0:
        return NewItem(sid, "user_message", "user", key, text=f"request {n} — ünïcødé ✓ " * 5)
    if n % 3 == 1:
        calls = {"tool_calls": [{"id": f"c{n}", "name": "read_file", "n": 1.5}]}
        return NewItem(sid, "assistant_message", "assistant", key, text="calling", data=calls)
    if n % 3 == 2:
        args = {"arguments": {"path": f"src/{n}.py", "nested": {"a": [1, None, True]}}}
        return NewItem(
            sid, "tool_call", "assistant", key, tool_call_id=f"c{n - 1}",
            tool_name="read_file", data=args,
        )  # fmt: skip
    artifact_id, sha, size = artifacts[n % len(artifacts)]
    return NewItem(
        sid, "tool_result", "tool", key, text=f"result preview {n}", tool_call_id=f"c{n - 2}",
        tool_name="read_file", artifact_id=artifact_id,
        data={"artifact": {"sha256": sha, "size_bytes": size}},
    )  # fmt: skip


async def build_session(
    res: Resources, tenant: str, n_items: int, *, status: str = "completed"
) -> uuid.UUID:
    """A session as the loop writes one: turns from user messages, tool results backed by
    registered artifacts (with the loop's checkpoint refs), a turn config and a compaction."""
    sid = uuid.uuid4()
    refs = [await res.store.put(tenant, f"tool output {k}\n".encode() * 64) for k in range(4)]
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="archive me", model_config={"m": 1})
        repo, artifacts = ArtifactRepository(db, tenant), []
        for ref in refs:
            aid = await repo.register(ref, uri=res.store.uri(ref))
            await repo.add_ref(
                aid, owner_type="checkpoint", owner_id=str(sid), required_for_resume=True
            )
            artifacts.append((aid, ref.sha256, ref.size_bytes))
    for start in range(0, n_items, 300):
        async with res.sessions() as db, db.begin():
            for n in range(start, min(start + 300, n_items)):
                await ItemRepository(db, tenant).append(_item(sid, n, artifacts))
    async with res.sessions() as db, db.begin():
        budget = ContextBudget(context_tokens=8_000)
        config_id = await ContextConfigRepository(db, tenant).record(
            config_of("scripted", "m-1", "You archive.", [], budget)
        )
        first_turn = (await TurnRepository(db, tenant).for_session(sid))[0]
        await TurnRepository(db, tenant).set_config(first_turn.id, config_id)
        if n_items > 10:
            await CompactionRepository(db, tenant).add(
                sid, covers_through_ordinal=n_items // 2, summary="so far: much", summary_tokens=4,
                model="m-1", idempotency_key=f"{sid}:compaction:1",
            )  # fmt: skip
        if status != "created":
            await SessionRepository(db, tenant).set_status(sid, status)
    return sid


async def hot_rows(res: Resources, sid: uuid.UUID) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    async with res.sessions() as db:
        for name, table, order in HOT:
            stmt = select(table).where(table.c.session_id == sid).order_by(table.c[order])
            found[name] = [dict(r) for r in (await db.execute(stmt)).mappings()]
    return found


async def archive_rows(res: Resources, sid: uuid.UUID) -> int:
    async with res.sessions() as db:
        stmt = select(func.count()).where(SessionArchiveRow.session_id == sid)
        return int(await db.scalar(stmt) or 0)


async def session_row(res: Resources, tenant: str, sid: uuid.UUID) -> SessionRow:
    async with res.sessions() as db:
        return await SessionRepository(db, tenant).get(sid)


async def shown(res: Resources, tenant: str, sid: uuid.UUID) -> str:
    """What `agentctl show` prints for the whole session, at a fixed width."""
    view = await load_view(res.sessions, tenant, sid, after=0, limit=2000, store=res.store)
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(render_view(view))
    return console.export_text()


WAITING_ARCHIVE = text(
    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    " AND query ILIKE 'SELECT sessions.status%FOR UPDATE%' AND pid <> pg_backend_pid()"
)


@asynccontextmanager
async def archive_held_at_commit(
    res: Resources, tenant: str, sid: uuid.UUID
) -> AsyncIterator[tuple[AsyncSession, int, asyncio.Task[ArchiveResult]]]:
    """An archive that has uploaded its snapshot and waits for the session row lock (held by
    the yielded session) in its final transaction; also yields its backend pid and task."""
    async with res.sessions() as holder, holder.begin():
        await SessionRepository(holder, tenant).lock(sid)
        task = asyncio.create_task(archive_session(res.sessions, res.store, tenant, sid))
        async with asyncio.timeout(30):
            while True:  # its own connection: in a transaction pg_stat_activity stays frozen
                async with res.engine.connect() as conn:
                    pid = await conn.scalar(WAITING_ARCHIVE)
                if pid:
                    break
                await asyncio.sleep(0.05)
        yield holder, int(pid), task


async def test_archive_then_rehydrate_restores_a_1000_item_session_exactly(
    resources: Resources, tenant: str
) -> None:
    res = resources
    sid = await build_session(res, tenant, 1000)
    before_rows, before_shown = await hot_rows(res, sid), await shown(res, tenant, sid)
    s0 = await session_row(res, tenant, sid)
    assert len(before_rows["items"]) == 1000 and len(before_rows["compactions"]) == 1
    assert before_shown.count("\n") > 1000 and "compactions" in before_shown

    archived = await archive_session(res.sessions, res.store, tenant, sid)

    assert archived.created and archived.item_count == 1000
    assert await hot_rows(res, sid) == {"turns": [], "compactions": [], "items": []}
    assert await archive_rows(res, sid) == 1
    assert (await session_row(res, tenant, sid)).status == "archived"
    ref = res.store.ref_for(tenant, archived.snapshot_sha256, archived.snapshot_bytes, "x")
    data = await res.store.get(tenant, ref)  # sha256-verified
    assert ref.key == archived.snapshot_key and data[:2] == b"\x1f\x8b"  # gzip
    snapshot = json.loads(gzip.decompress(data))
    assert snapshot["schema_version"] == 2 and len(snapshot["items"]) == 1000
    # The 4 artifacts its items name are listed in it; their rows left with the session.
    assert len(snapshot["artifacts"]) == 4

    restored = await rehydrate_session(res.sessions, res.store, tenant, sid)

    assert restored.restored and restored.status == "completed" and restored.item_count == 1000
    assert await hot_rows(res, sid) == before_rows
    s1 = await session_row(res, tenant, sid)
    kept = ("status", "next_ordinal", "updated_at")
    assert [getattr(s1, k) for k in kept] == [getattr(s0, k) for k in kept]
    assert await archive_rows(res, sid) == 0
    assert await shown(res, tenant, sid) == before_shown
    # Reads rehydrate on their own: `show` prints the same, `read_session` needs the store.
    await archive_session(res.sessions, res.store, tenant, sid)
    assert await shown(res, tenant, sid) == before_shown
    await archive_session(res.sessions, res.store, tenant, sid)
    with pytest.raises(SessionArchived):
        await tasks.read_session(res.sessions, tenant, str(sid))
    row, items = await tasks.read_session(res.sessions, tenant, str(sid), store=res.store)
    assert row.status == "completed" and len(items) == 1000


async def test_a_change_before_the_final_commit_aborts_archive_and_a_retry_succeeds(
    resources: Resources, tenant: str
) -> None:
    res = resources
    sid = await build_session(res, tenant, 12)
    async with archive_held_at_commit(res, tenant, sid) as (holder, _, archiving):
        await ItemRepository(holder, tenant).append(
            NewItem(sid, "user_message", "user", f"{sid}:late", text="one more thing")
        )
    with pytest.raises(ArchiveConflict):
        await archiving

    assert len((await hot_rows(res, sid))["items"]) == 13 and await archive_rows(res, sid) == 0
    assert (await session_row(res, tenant, sid)).status == "completed"
    retried = await archive_session(res.sessions, res.store, tenant, sid)
    assert retried.created and retried.item_count == 13


async def test_a_crash_in_the_final_transaction_leaves_the_hot_rows_and_only_an_orphan(
    resources: Resources, tenant: str
) -> None:
    res = resources
    sid = await build_session(res, tenant, 12)
    before = await hot_rows(res, sid)
    prefix = f"{res.store.prefix}/{tenant}/"
    keys_before = set(await s3_keys(res, prefix))
    async with archive_held_at_commit(res, tenant, sid) as (holder, pid, archiving):
        # What PostgreSQL sees when the archiving worker dies mid-transaction.
        await holder.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(DBAPIError):
            await archiving

    assert await hot_rows(res, sid) == before and await archive_rows(res, sid) == 0
    assert (await session_row(res, tenant, sid)).status == "completed"
    orphans = set(await s3_keys(res, prefix)) - keys_before
    assert len(orphans) == 1
    retried = await archive_session(res.sessions, res.store, tenant, sid)
    # Same content, same key: the retry's upload was a no-op and adopted the orphan.
    assert retried.created and {retried.snapshot_key} == orphans
    assert set(await s3_keys(res, prefix)) - keys_before == orphans


async def test_archive_and_rehydrate_are_idempotent_tenant_scoped_and_restore_once(
    resources: Resources, tenant: str
) -> None:
    res = resources
    sid = await build_session(res, tenant, 40)
    before = await hot_rows(res, sid)
    with pytest.raises(SessionNotFound):
        await archive_session(res.sessions, res.store, "intruder", sid)
    first = await archive_session(res.sessions, res.store, tenant, sid)
    again = await archive_session(res.sessions, res.store, tenant, sid)
    assert first.created and not again.created
    assert again.snapshot_sha256 == first.snapshot_sha256 and await archive_rows(res, sid) == 1
    for intruding in (rehydrate_session, ensure_hot):
        with pytest.raises(SessionNotFound):
            await intruding(res.sessions, res.store, "intruder", sid)

    results = await asyncio.gather(
        *(rehydrate_session(res.sessions, res.store, tenant, sid) for _ in range(4))
    )

    assert sorted(r.restored for r in results) == [False, False, False, True]
    assert await hot_rows(res, sid) == before
    assert not await ensure_hot(res.sessions, res.store, tenant, sid)
    assert await hot_rows(res, sid) == before


@pytest.mark.parametrize("status", ["created", "running", "waiting_approval"])
async def test_a_session_that_has_not_ended_is_not_archived(
    resources: Resources, tenant: str, status: str
) -> None:
    sid = await build_session(resources, tenant, 5, status=status)
    before = await hot_rows(resources, sid)
    with pytest.raises(SessionNotArchivable):
        await archive_session(resources.sessions, resources.store, tenant, sid)
    assert await hot_rows(resources, sid) == before and await archive_rows(resources, sid) == 0


async def test_archive_idle_sessions_picks_only_ended_sessions_idle_past_the_threshold(
    resources: Resources, tenant: str
) -> None:
    res = resources
    statuses = ["completed", "failed", "cancelled", "running", "waiting_device", "completed"]
    made = [await build_session(res, tenant, 3, status=s) for s in statuses]
    hour = timedelta(hours=1)
    async with res.sessions() as db, db.begin():
        await db.execute(  # all but the last are idle for two hours
            update(SessionRow)
            .where(SessionRow.id.in_(made[:5]))
            .values(updated_at=func.now() - 2 * hour)
        )

    report = await archive_idle_sessions(res.sessions, res.store, tenant, idle_for=hour)
    archived = report.archived

    assert set(archived) == set(made[:3]) and report.failed == []
    for sid, status in zip(made, statuses, strict=True):
        now = (await session_row(res, tenant, sid)).status
        assert now == ("archived" if sid in archived else status)
    again = await archive_idle_sessions(res.sessions, res.store, tenant, idle_for=hour)
    assert (again.archived, again.failed) == ([], [])


def test_a_session_row_archived_before_a_column_was_added_decodes_without_it() -> None:
    sessions = TABLES["sessions"]
    added_since = {"task_check", "checked", "forked_from", "forked_at", "replay"}
    archived = {c.name: None for c in sessions.columns if c.name not in added_since}
    archived["id"] = str(uuid.uuid4())
    decoded = decode(sessions, archived)
    assert set(decoded) == set(archived) and decoded["id"] == uuid.UUID(archived["id"])
