"""Scoped memories against a real PostgreSQL: idempotent remember (also under races), supersede
chains, forget, tenant and scope isolation, query matching; then the remember/recall/forget
tools over a real SqlMemoryAccess."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from sqlalchemy import event, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.errors import MemoryNotFound
from durable_agents.storage.memories import MAX_CONTENT_CHARS, MemoryRepository
from durable_agents.storage.models import MemoryRow
from durable_agents.workers.resources import Resources

AGENT_A = ("agent", "a")


async def put(
    res: Resources,
    tenant: str,
    content: str,
    *,
    scope: tuple[str, str] = AGENT_A,
    key: str | None = None,
    supersedes: uuid.UUID | None = None,
) -> MemoryRow:
    async with res.sessions() as db, db.begin():
        return await MemoryRepository(db, tenant).remember(
            *scope,
            content,
            source={"test": True},
            created_by="agent",
            idempotency_key=key,
            supersedes_id=supersedes,
        )


async def contents(
    res: Resources, tenant: str, scope: tuple[str, str] = AGENT_A, query: str | None = None
) -> list[str]:
    async with res.sessions() as db:
        rows = await MemoryRepository(db, tenant).recall(*scope, query=query)
        return [r.content for r in rows]


async def row_count(res: Resources, tenant: str) -> int:
    async with res.sessions() as db:
        stmt = select(func.count()).select_from(MemoryRow).where(MemoryRow.tenant_id == tenant)
        return int(await db.scalar(stmt) or 0)


async def race(
    res: Resources, tenant: str, op: Callable[[AsyncSession | None], Coroutine[Any, Any, MemoryRow]]
) -> tuple[MemoryRow, asyncio.Task[MemoryRow]]:
    """Run op in an open transaction; start op again in another and wait until it blocks on a
    lock held by the first; then commit the first. Returns (first row, second's task)."""
    waiting = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
    async with res.sessions() as db, db.begin():
        first = await op(db)
        second = asyncio.create_task(op(None))
        async with asyncio.timeout(10):
            while True:  # pg_stat_activity is snapshotted per transaction: ask in a fresh one
                async with res.engine.connect() as conn:
                    if await conn.scalar(waiting):
                        break
                await asyncio.sleep(0.02)
        assert not second.done()
    await asyncio.wait([second])
    return first, second


def keyed_op(
    res: Resources, tenant: str, content: str, key: str, supersedes: uuid.UUID | None = None
) -> Callable[[AsyncSession | None], Coroutine[Any, Any, MemoryRow]]:
    async def op(db: AsyncSession | None) -> MemoryRow:
        if db is None:
            return await put(res, tenant, content, key=key, supersedes=supersedes)
        return await MemoryRepository(db, tenant).remember(
            *AGENT_A,
            content,
            source={},
            created_by="agent",
            idempotency_key=key,
            supersedes_id=supersedes,
        )

    return op


# --- remember / recall ---------------------------------------------------------------


async def test_remember_then_recall_newest_first(resources: Resources, tenant: str) -> None:
    first = await put(resources, tenant, "likes tea")
    await put(resources, tenant, "works in UTC")

    assert await contents(resources, tenant) == ["works in UTC", "likes tea"]
    assert (first.version, first.created_by, first.source) == (1, "agent", {"test": True})
    assert (first.scope_type, first.scope_id, first.supersedes_id) == ("agent", "a", None)


@pytest.mark.parametrize(
    ("scope", "author", "content"),
    [
        (("team", "x"), "agent", "ok"),
        (("agent", ""), "agent", "ok"),
        (AGENT_A, "robot", "ok"),
        (AGENT_A, "agent", ""),
        (AGENT_A, "agent", "  \n "),
        (AGENT_A, "agent", "x" * (MAX_CONTENT_CHARS + 1)),
    ],
)
async def test_remember_rejects_bad_input(
    resources: Resources, tenant: str, scope: tuple[str, str], author: str, content: str
) -> None:
    async with resources.sessions() as db, db.begin():
        with pytest.raises(ValueError):
            await MemoryRepository(db, tenant).remember(
                *scope, content, source={}, created_by=author
            )
    assert await row_count(resources, tenant) == 0


async def test_content_at_the_limit_is_kept(resources: Resources, tenant: str) -> None:
    row = await put(resources, tenant, "x" * MAX_CONTENT_CHARS)
    assert len(row.content) == MAX_CONTENT_CHARS


async def test_retried_remember_returns_the_first_row(resources: Resources, tenant: str) -> None:
    first = await put(resources, tenant, "first", key="k1")
    again = await put(resources, tenant, "second attempt", key="k1")

    assert (again.id, again.content) == (first.id, "first")
    assert await row_count(resources, tenant) == 1


async def test_same_key_from_two_open_transactions_yields_one_row(
    resources: Resources, tenant: str
) -> None:
    first, second = await race(resources, tenant, keyed_op(resources, tenant, "fact", "k"))

    assert second.result().id == first.id
    assert await row_count(resources, tenant) == 1


async def test_same_key_burst_yields_one_row(resources: Resources, tenant: str) -> None:
    rows = await asyncio.gather(*(put(resources, tenant, f"v{i}", key="k") for i in range(10)))

    assert len({r.id for r in rows}) == 1
    assert await row_count(resources, tenant) == 1


async def test_same_key_in_two_tenants_stores_two_rows(resources: Resources, tenant: str) -> None:
    other = f"{tenant}-other"
    mine = await put(resources, tenant, "mine", key="shared-key")
    theirs = await put(resources, other, "theirs", key="shared-key")

    assert mine.id != theirs.id
    assert (await contents(resources, tenant), await contents(resources, other)) == (
        ["mine"],
        ["theirs"],
    )


# --- supersede, forget, history ------------------------------------------------------


async def test_supersede_bumps_version_and_hides_the_old(resources: Resources, tenant: str) -> None:
    v1 = await put(resources, tenant, "lives in Oslo")
    v2 = await put(resources, tenant, "lives in Bergen", supersedes=v1.id)
    v3 = await put(resources, tenant, "lives in Tromsø", supersedes=v2.id)

    assert (v2.version, v2.supersedes_id, v3.version) == (2, v1.id, 3)
    assert await contents(resources, tenant) == ["lives in Tromsø"]
    async with resources.sessions() as db:
        repo = MemoryRepository(db, tenant)
        assert await repo.get(v1.id) is None
        old = await repo.get(v1.id, include_deleted=True)
        assert old is not None and old.deleted_at is not None
        assert [r.version for r in await repo.history(v3.id)] == [3, 2, 1]


async def test_supersede_of_a_dead_or_foreign_memory_is_not_found(
    resources: Resources, tenant: str
) -> None:
    old = await put(resources, tenant, "v1")
    await put(resources, tenant, "v2", supersedes=old.id)
    gone = await put(resources, tenant, "forgotten")
    async with resources.sessions() as db, db.begin():
        assert await MemoryRepository(db, tenant).forget(gone.id)
    elsewhere = await put(resources, tenant, "user fact", scope=("user", "u1"))
    foreign = await put(resources, f"{tenant}-other", "theirs")

    for target in (old.id, gone.id, elsewhere.id, foreign.id, uuid.uuid4()):
        with pytest.raises(MemoryNotFound):
            await put(resources, tenant, "replacement", supersedes=target)
    assert await row_count(resources, tenant) == 4


async def test_retried_supersede_returns_the_first_result(
    resources: Resources, tenant: str
) -> None:
    v1 = await put(resources, tenant, "v1")
    v2 = await put(resources, tenant, "v2", key="sup", supersedes=v1.id)
    again = await put(resources, tenant, "v2", key="sup", supersedes=v1.id)

    assert again.id == v2.id
    assert await row_count(resources, tenant) == 2


async def test_racing_supersedes_of_one_memory(resources: Resources, tenant: str) -> None:
    v1 = await put(resources, tenant, "v1")
    # Same key: the waiter returns the winner's row instead of failing.
    first, second = await race(resources, tenant, keyed_op(resources, tenant, "v2", "s", v1.id))
    assert second.result().id == first.id

    # Different keys: the waiter finds the memory already superseded.
    mine = keyed_op(resources, tenant, "v3a", "a", first.id)
    theirs = keyed_op(resources, tenant, "v3b", "b", first.id)
    _, lost = await race(resources, tenant, lambda db: (mine if db is not None else theirs)(db))
    assert isinstance(lost.exception(), MemoryNotFound)
    assert await contents(resources, tenant) == ["v3a"]


async def test_forget_hides_the_memory_once(resources: Resources, tenant: str) -> None:
    keep = await put(resources, tenant, "keep")
    drop = await put(resources, tenant, "drop")
    async with resources.sessions() as db, db.begin():
        repo = MemoryRepository(db, tenant)
        assert await repo.forget(drop.id) is True
        assert await repo.forget(drop.id) is False
        assert await repo.forget(uuid.uuid4()) is False

    assert await contents(resources, tenant) == [keep.content]


async def test_another_tenants_memory_looks_missing(resources: Resources, tenant: str) -> None:
    theirs = await put(resources, f"{tenant}-other", "secret")
    async with resources.sessions() as db, db.begin():
        repo = MemoryRepository(db, tenant)
        assert await repo.recall(*AGENT_A, query=None) == []
        assert await repo.get(theirs.id, include_deleted=True) is None
        assert await repo.history(theirs.id) == []
        assert await repo.forget(theirs.id) is False
    assert await contents(resources, f"{tenant}-other") == ["secret"]  # forget did nothing


async def test_scopes_do_not_leak(resources: Resources, tenant: str) -> None:
    await put(resources, tenant, "a's note", scope=("agent", "a"))
    await put(resources, tenant, "b's note", scope=("agent", "b"))
    await put(resources, tenant, "user a's note", scope=("user", "a"))

    assert await contents(resources, tenant, ("agent", "a")) == ["a's note"]
    assert await contents(resources, tenant, ("agent", "b")) == ["b's note"]
    assert await contents(resources, tenant, ("user", "a")) == ["user a's note"]
    assert await contents(resources, tenant, ("project", "a")) == []


# --- query matching ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("DARK fridays", ["deploys on Fridays", "prefers Dark mode"]),
        ("%", ["wants 100% coverage"]),
        ("_", ["uses snake_case"]),
        ("a%e", []),
        ("\\", []),
        (
            "   ",
            ["uses snake_case", "wants 100% coverage", "deploys on Fridays", "prefers Dark mode"],
        ),
    ],
)
async def test_query_matches_any_word_literally(
    resources: Resources, tenant: str, query: str, expected: list[str]
) -> None:
    for content in ("prefers Dark mode", "deploys on Fridays", "wants 100% coverage"):
        await put(resources, tenant, content)
    await put(resources, tenant, "uses snake_case")

    assert await contents(resources, tenant, query=query) == expected


async def test_recall_rides_the_live_scope_index(resources: Resources, tenant: str) -> None:
    await put(resources, tenant, "indexed")
    statements: list[tuple[str, Any]] = []
    async with resources.sessions() as db, db.begin():
        conn = await db.connection()
        await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")

        def capture(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
            statements.append((statement, params))

        event.listen(conn.sync_connection, "before_cursor_execute", capture)
        await MemoryRepository(db, tenant).recall(*AGENT_A, query="indexed")
        event.remove(conn.sync_connection, "before_cursor_execute", capture)
        statement, params = statements[-1]
        plan = (await conn.exec_driver_sql(f"EXPLAIN {statement}", params)).scalars().all()
    assert "ix_memories_scope_live" in "\n".join(plan)
