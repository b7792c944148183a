"""The cold tier's residue: an archived session holds one ref, on its snapshot, which lists
the artifacts its items name (their rows and refs leave PostgreSQL with it), and GC reads
those lists before deleting an object without a row.

Property (seeded random schedules of sessions written, archived, rehydrated, other holders'
refs taken and released, GC passes and clock jumps, on the real PostgreSQL and S3): nothing
a hot or archived session needs is ever deleted, and a rehydrated session reads back."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from durable_agents.storage.archive import archive_session, rehydrate_session
from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.gc import collect
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import ArtifactRefRow, ArtifactRow, ItemRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.workers.resources import Resources

WINDOW = timedelta(hours=1)


@dataclass
class Session:
    sid: uuid.UUID
    refs: list[ArtifactRef]
    archived: bool = False


@dataclass
class World:
    res: Resources
    tenant: str
    rng: random.Random
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    sessions: list[Session] = field(default_factory=list)
    # business_output refs of other holders: (owner, artifact id, ref)
    others: list[tuple[str, uuid.UUID, ArtifactRef]] = field(default_factory=list)

    def blob(self) -> bytes:
        return f"result {self.rng.randrange(8)} ".encode() * 40  # shared across sessions

    async def write_session(self) -> None:
        sid = uuid.uuid4()
        blobs = {self.blob() for _ in range(self.rng.randrange(1, 4))}
        refs = [await self.res.store.put(self.tenant, b, "text/plain") for b in sorted(blobs)]
        async with self.res.sessions() as db, db.begin():
            await SessionRepository(db, self.tenant).create(sid, title="t", model_config={})
            for n, (ref, data) in enumerate(zip(refs, sorted(blobs), strict=True)):
                aid = await register_uploaded(db, self.res.store, ref, data)
                await ArtifactRepository(db, self.tenant).add_ref(
                    aid, owner_type="checkpoint", owner_id=str(sid), required_for_resume=True
                )
                item = NewItem(
                    sid, "tool_result", "tool", f"{sid}:{n}", artifact_id=aid, tool_call_id=f"c{n}"
                )
                await ItemRepository(db, self.tenant).append(item)
            await SessionRepository(db, self.tenant).set_status(sid, "completed")
        self.sessions.append(Session(sid, refs))

    async def hold_elsewhere(self, data: bytes | None = None) -> None:
        data = data or self.blob()
        ref = await self.res.store.put(self.tenant, data, "text/plain")
        owner = f"report-{len(self.others)}"
        async with self.res.sessions() as db, db.begin():
            aid = await register_uploaded(db, self.res.store, ref, data)
            await ArtifactRepository(db, self.tenant).add_ref(
                aid, owner_type="business_output", owner_id=owner, required_for_resume=True
            )
        self.others.append((owner, aid, ref))

    async def release_elsewhere(self) -> None:
        if self.others:
            owner, aid, _ = self.others.pop(self.rng.randrange(len(self.others)))
            async with self.res.sessions() as db, db.begin():
                await ArtifactRepository(db, self.tenant).release_ref(
                    aid, owner_type="business_output", owner_id=owner, expires_at=self.now
                )

    async def archive_or_rehydrate(self) -> None:
        if not self.sessions:
            return
        s = self.rng.choice(self.sessions)
        if s.archived:
            await rehydrate_session(self.res.sessions, self.res.store, self.tenant, s.sid)
        else:
            await archive_session(self.res.sessions, self.res.store, self.tenant, s.sid)
        s.archived = not s.archived

    async def gc(self) -> None:
        await collect(
            self.res.sessions, self.res.store, now=self.now, window=WINDOW, tenant_id=self.tenant
        )

    async def check_nothing_needed_is_gone(self) -> None:
        needed = [r for s in self.sessions for r in s.refs] + [r for *_, r in self.others]
        for ref in needed:
            assert await self.res.store.exists(ref), f"{ref.sha256[:12]} was deleted"
        async with self.res.sessions() as db:
            for s in self.sessions:
                if s.archived:
                    continue
                ids = list(
                    await db.scalars(
                        select(ItemRow.artifact_id).where(
                            ItemRow.tenant_id == self.tenant, ItemRow.session_id == s.sid
                        )
                    )
                )
                rows = await ArtifactRepository(db, self.tenant).get_many(
                    i for i in ids if i is not None
                )
                assert [r.status for r in rows.values()] == ["active"] * len(s.refs)


async def _count(res: Resources, stmt: object) -> int:
    async with res.sessions() as db:
        return int(await db.scalar(stmt) or 0)  # type: ignore[call-overload]


async def test_an_archived_session_keeps_one_ref_and_no_artifact_row_of_its_own(
    resources: Resources, tenant: str
) -> None:
    world = World(resources, tenant, random.Random(0))
    await world.write_session()
    s = world.sessions[0]
    shas = [r.sha256 for r in s.refs]
    rows = select(func.count()).where(ArtifactRow.tenant_id == tenant, ArtifactRow.sha256.in_(shas))
    refs = select(func.count()).where(
        ArtifactRefRow.tenant_id == tenant, ArtifactRefRow.owner_id == str(s.sid)
    )
    assert (await _count(resources, rows), await _count(resources, refs)) == (len(shas), len(shas))

    await world.archive_or_rehydrate()
    assert (await _count(resources, rows), await _count(resources, refs)) == (0, 1)
    world.now += 3 * WINDOW  # everything uploaded is older than the window
    await world.gc()
    await world.gc()
    await world.check_nothing_needed_is_gone()

    await world.archive_or_rehydrate()  # rehydrate: rows and the session's refs come back
    assert (await _count(resources, rows), await _count(resources, refs)) == (
        len(shas),
        len(shas) + 1,  # and the snapshot's, released: GC takes it after the window
    )
    await world.check_nothing_needed_is_gone()


async def test_bytes_registered_again_and_released_stay_while_a_snapshot_lists_them(
    resources: Resources, tenant: str
) -> None:
    """The sweep path: the same bytes get a row of their own after the archive; when that
    holder lets go, the row is swept but the object stays for the archived session."""
    world = World(resources, tenant, random.Random(0))
    await world.write_session()
    s = world.sessions[0]
    await world.archive_or_rehydrate()
    data = await resources.store.get(tenant, s.refs[0])
    await world.hold_elsewhere(data)
    await world.release_elsewhere()
    await world.gc()  # marks the new row unreachable
    world.now += 2 * WINDOW
    await world.gc()  # sweeps it
    rows = select(func.count()).where(
        ArtifactRow.tenant_id == tenant, ArtifactRow.sha256 == s.refs[0].sha256
    )
    assert await _count(resources, rows) == 0
    await world.check_nothing_needed_is_gone()
    await world.archive_or_rehydrate()
    await world.check_nothing_needed_is_gone()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_gc_never_deletes_what_a_hot_or_archived_session_needs(
    resources: Resources, tenant: str, seed: int
) -> None:
    world = World(resources, tenant, random.Random(seed))
    ops = ["write", "write", "archive", "archive", "hold", "release", "gc", "advance"]
    for _ in range(30):
        op = world.rng.choice(ops)
        if op == "write":
            await world.write_session()
        elif op == "archive":
            await world.archive_or_rehydrate()
        elif op == "hold":
            await world.hold_elsewhere()
        elif op == "release":
            await world.release_elsewhere()
        elif op == "advance":
            world.now += world.rng.choice([timedelta(minutes=10), WINDOW, 3 * WINDOW])
        else:
            await world.gc()
        await world.check_nothing_needed_is_gone()
    # Every session back: each reads its items' artifacts again.
    for s in world.sessions:
        if s.archived:
            await world.archive_or_rehydrate()
    world.now += 3 * WINDOW
    await world.gc()
    await world.check_nothing_needed_is_gone()
