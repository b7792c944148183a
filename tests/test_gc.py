"""Mark-and-sweep GC against a seeded random schedule of uploads, commits, crashes between
them, ref releases, concurrent commits and GC runs, on the real PostgreSQL and S3.

Properties: a GC pass never deletes an object (or row) that a live ref needs, even with a
commit of the same bytes racing it; every orphan older than the window is collected."""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.gc import collect
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ArtifactRef, GcInput
from durable_agents.workflows.gc import ArtifactGcWorkflow
from tests.conftest import AgentRunner
from tests.support.helpers import s3_keys

WINDOW = timedelta(hours=1)


@dataclass
class Ref:
    ref: ArtifactRef
    artifact_id: uuid.UUID
    owner: str
    required: bool
    expires_at: datetime | None

    def live(self, now: datetime) -> bool:
        return self.required or self.expires_at is None or self.expires_at > now


class World:
    def __init__(self, res: Resources, tenant: str, rng: random.Random) -> None:
        self.res, self.tenant, self.rng = res, tenant, rng
        self.now = datetime.now(UTC)
        self.blobs = [f"blob {n} ".encode() * (50 + n) for n in range(6)]
        self.refs: list[Ref] = []

    async def upload(self) -> tuple[ArtifactRef, bytes]:
        data = self.rng.choice(self.blobs)
        return await self.res.store.put(self.tenant, data, "text/plain"), data

    async def commit(self) -> None:
        ref, data = await self.upload()
        required = self.rng.random() < 0.5
        expires = self.rng.choice([None, self.now - WINDOW, self.now + WINDOW])
        owner = f"o{len(self.refs)}"
        async with self.res.sessions() as db, db.begin():
            artifact_id = await register_uploaded(db, self.res.store, ref, data)
            await ArtifactRepository(db, self.tenant).add_ref(
                artifact_id,
                owner_type="business_output",
                owner_id=owner,
                required_for_resume=required,
                expires_at=None if required else expires,
            )
        self.refs.append(Ref(ref, artifact_id, owner, required, None if required else expires))

    async def release(self) -> None:
        live = [r for r in self.refs if r.live(self.now)]
        if not live:
            return
        r = self.rng.choice(live)
        r.required, r.expires_at = False, self.now
        async with self.res.sessions() as db, db.begin():
            await ArtifactRepository(db, self.tenant).release_ref(
                r.artifact_id, owner_type="business_output", owner_id=r.owner, expires_at=self.now
            )

    async def gc(self) -> None:
        await collect(
            self.res.sessions, self.res.store, now=self.now, window=WINDOW, tenant_id=self.tenant
        )

    async def check_live_refs_resolve(self) -> None:
        for r in self.refs:
            if not r.live(self.now):
                continue
            assert await self.res.store.exists(r.ref), f"live ref {r.owner} lost its object"
            async with self.res.sessions() as db:
                row = await ArtifactRepository(db, self.tenant).get(r.artifact_id)
            assert row.status == "active" or not r.live(self.now)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_gc_never_deletes_what_a_live_ref_needs_and_collects_old_orphans(
    resources: Resources, tenant: str, seed: int
) -> None:
    world = World(resources, tenant, random.Random(seed))
    for _ in range(40):
        op = world.rng.choice(["commit", "commit", "crash", "release", "gc", "advance", "race"])
        if op == "commit":
            await world.commit()
        elif op == "crash":
            await world.upload()  # uploaded, then the worker died before committing
        elif op == "release":
            await world.release()
        elif op == "advance":
            world.now += world.rng.choice([timedelta(minutes=10), WINDOW, 2 * WINDOW])
        elif op == "race":
            await asyncio.gather(world.commit(), world.gc())
        else:
            await world.gc()
        await world.check_live_refs_resolve()

    # Eventually: release everything, let the window pass twice; nothing is left behind.
    for r in world.refs:
        if r.live(world.now):
            r.required, r.expires_at = False, world.now
            async with resources.sessions() as db, db.begin():
                await ArtifactRepository(db, tenant).release_ref(
                    r.artifact_id,
                    owner_type="business_output",
                    owner_id=r.owner,
                    expires_at=world.now,
                )
    for _ in range(2):
        world.now += 2 * WINDOW
        await world.gc()
    assert await s3_keys(resources, f"{resources.store.prefix}/{tenant}/") == []


async def test_dry_run_reports_without_deleting(resources: Resources, tenant: str) -> None:
    orphan = await resources.store.put(tenant, b"never committed", "text/plain")
    later = datetime.now(UTC) + 2 * WINDOW
    report = await collect(
        resources.sessions,
        resources.store,
        now=later,
        window=WINDOW,
        tenant_id=tenant,
        dry_run=True,
    )
    assert report.orphans == [(orphan.key, len(b"never committed"))]
    assert report.bytes_reclaimed == len(b"never committed")
    assert await resources.store.exists(orphan)
    report = await collect(
        resources.sessions, resources.store, now=later, window=WINDOW, tenant_id=tenant
    )
    assert not await resources.store.exists(orphan)


async def test_young_orphans_and_recently_marked_artifacts_survive(
    resources: Resources, tenant: str
) -> None:
    young = await resources.store.put(tenant, b"just uploaded", "text/plain")
    now = datetime.now(UTC)
    await collect(resources.sessions, resources.store, now=now, window=WINDOW, tenant_id=tenant)
    assert await resources.store.exists(young)  # its commit may still be on the way

    ref = await resources.store.put(tenant, b"released recently", "text/plain")
    async with resources.sessions() as db, db.begin():
        artifact_id = await register_uploaded(db, resources.store, ref, b"released recently")
        await ArtifactRepository(db, tenant).add_ref(
            artifact_id,
            owner_type="trajectory",
            owner_id="span-1",
            required_for_resume=False,
            expires_at=now,
        )
    await collect(resources.sessions, resources.store, now=now, window=WINDOW, tenant_id=tenant)
    await collect(
        resources.sessions, resources.store, now=now + WINDOW / 2, window=WINDOW, tenant_id=tenant
    )
    assert await resources.store.exists(ref)  # marked, but inside the safety window
    # Re-referencing it revives it before the sweep.
    async with resources.sessions() as db, db.begin():
        await register_uploaded(db, resources.store, ref, b"released recently")
        await ArtifactRepository(db, tenant).add_ref(
            artifact_id, owner_type="checkpoint", owner_id="s", required_for_resume=True
        )
    await collect(
        resources.sessions, resources.store, now=now + 3 * WINDOW, window=WINDOW, tenant_id=tenant
    )
    assert await resources.store.exists(ref)


async def test_agentctl_gc_dry_run_then_real_run_reports_bytes(
    resources: Resources, tenant: str, cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from durable_agents.workers.cli.main import main

    orphan = await resources.store.put(tenant, b"orphaned bytes", "text/plain")
    code = await asyncio.to_thread(main, ["gc", "--dry-run", "--window", "0s", "--tenant", tenant])
    out = capsys.readouterr().out
    assert code == 0 and f"would delete orphan {orphan.key} (14 B)" in out
    assert await resources.store.exists(orphan)
    code = await asyncio.to_thread(main, ["gc", "--window", "0s", "--tenant", tenant])
    out = capsys.readouterr().out
    assert code == 0 and "14 bytes" in out
    assert not await resources.store.exists(orphan)
    code = await asyncio.to_thread(main, ["gc", "--window", "soon"])
    assert code == 1 and "not a duration" in capsys.readouterr().err


async def test_gc_runs_as_a_temporal_workflow(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    orphan = await resources.store.put(tenant, b"collected by the workflow", "text/plain")
    async with agent_worker(ScriptedProvider([]), workspace) as queue:
        result = await client.execute_workflow(
            ArtifactGcWorkflow.run,
            GcInput(window_seconds=0, tenant_id=tenant),
            id=f"gc-{tenant}",
            task_queue=queue,
        )
    assert result.orphans == 1 and result.bytes_reclaimed == len(b"collected by the workflow")
    assert not await resources.store.exists(orphan)


async def test_gc_schedule_is_created_then_updated(
    client: Client, cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from durable_agents.workers.cli.gc import SCHEDULE_ID
    from durable_agents.workers.cli.main import main

    try:
        assert await asyncio.to_thread(main, ["gc", "schedule", "--every", "2h"]) == 0
        assert "created schedule" in capsys.readouterr().out
        assert await asyncio.to_thread(main, ["gc", "schedule", "--every", "30m"]) == 0
        assert "updated schedule" in capsys.readouterr().out
        desc = await client.get_schedule_handle(SCHEDULE_ID).describe()
        assert desc.schedule.spec.intervals[0].every == timedelta(minutes=30)
    finally:
        await client.get_schedule_handle(SCHEDULE_ID).delete()
