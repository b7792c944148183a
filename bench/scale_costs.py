"""What one agent step and one parked session cost in Temporal, PostgreSQL and S3: counted.

On a throwaway embedded stack (Temporal dev server, PostgreSQL, SeaweedFS), with the cloud
worker in this process so one S3 client sees every request (bench/scale_meters.py):

1. Step loop, per result size R (default 2,000 and 20,000 bytes): one session of N1 steps
   and one of N2 steps, each step a scripted model call asking for `read_file` of a distinct
   R-byte file (the model's own reply is one short sentence). The per-step cost is the
   difference of the two sessions over N2 - N1 steps, so each session's fixed cost (task
   message, first and last model call, workflow start) cancels out; the fixed cost is then
   what the N1 session cost beyond N1 steps. Then both sessions are archived to the cold
   tier: what leaves PostgreSQL, what stays, what S3 receives.
2. Parked on approval: K sessions each asking for one `write_file` under policy "always",
   measured at each phase: start -> all parked, one `status` query each, approve -> all
   completed, archive, and VACUUM FULL of the hot tables.

Counts and bytes are deterministic for a given commit (the step profile fixes them);
nothing here is a timing. Results: docs/SCALE.md.

    cd bench && ../.venv/bin/python scale_costs.py                 # ~3-4 min, 2 shared cores
    cd bench && ../.venv/bin/python scale_costs.py --sizes 2000,20000,100000 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from naive_temporal import seeded_text  # bench/ is on sys.path when run as a script
from parked_worker import task_text, worker_provider
from proc_stats import CpuSnapshot
from scale_meters import (
    S3Meter,
    bucket_totals,
    pg_state,
    settled_actions,
    vacuum_full,
    workflow_cost,
)
from scale_phase import Phase, Reading, flat_reading, phase_text, summary, tables_text
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from stack_disk import stack_disk
from temporalio.client import Client
from throwaway_stack import bench_devstack

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.storage.archive import archive_session
from durable_agents.storage.db import make_engine
from durable_agents.storage.workspaces import TENANT_DIR
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.tasks import TaskOptions, live_status, start_task
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings, Settings
from durable_agents.workers.stack import DevStack, StackEndpoints
from durable_agents.workers.temporal_client import connect_client

# Archive deletes rows of these (the artifacts' too: their list moves into the snapshot).
HOT_TABLES = [
    "items", "turns", "compactions", "sessions", "session_archives", "agent_artifacts",
    "agent_artifact_refs",
]  # fmt: skip


CALL_ID = "call_0_0"  # the parked sessions' one write_file call (ScriptedProvider: turn 0)


@dataclass
class Bench:
    stack: DevStack
    ep: StackEndpoints
    res: Resources
    owner: AsyncEngine
    meter: S3Meter
    client: Client
    state: Path
    phases: list[Phase] = field(default_factory=list)
    queries: int = 0

    async def reading(self) -> Reading:
        # First, so the reading's own queries fall inside the phase after it: a per-step
        # figure is two phases subtracted, and the readings' cost cancels there.
        cpu = CpuSnapshot.take([], self.state)
        pg = await pg_state(self.owner, self.res.engine)
        bucket = await bucket_totals(self.res.store, self.meter)
        actions = await settled_actions(self.stack.temporal.metrics_port)
        disk = stack_disk(self.state)
        values = flat_reading(pg, self.meter.snapshot(), bucket, dict(actions), cpu.by_group, disk)
        values["temporal.queries"] = self.queries
        return Reading(values)

    async def phase(
        self, name: str, units: int, unit: str, work: Callable[[], Awaitable[list[str]]]
    ) -> Phase:
        """Run `work` between two readings; it returns the workflow ids whose histories
        (as they stand afterwards) belong to the phase."""
        before = await self.reading()
        began = time.perf_counter()
        workflow_ids = await work()
        wall = time.perf_counter() - began
        phase = (await self.reading()).since(before, name, units, unit)
        phase.wall_s = wall
        phase.workflow_ids = workflow_ids
        for wid in workflow_ids:
            phase.add_history(await workflow_cost(self.client, wid))
        self.add(phase)
        return phase

    def add(self, phase: Phase) -> None:
        self.phases.append(phase)
        print(phase_text(phase), flush=True)
        print(tables_text(phase), flush=True)


@asynccontextmanager
async def open_bench() -> AsyncIterator[Bench]:
    async with bench_devstack() as (stack, ep, res, state):
        owner = make_engine(ep.database_migration_url)
        try:
            client = await connect_client(
                ep.temporal_address,
                "default",
                data_converter=data_converter_with_offload(res.store),
            )
            yield Bench(stack, ep, res, owner, S3Meter(res.store.client), client, state)
        finally:
            await owner.dispose()


def worker_for(b: Bench, provider: ScriptedProvider) -> tuple[Any, str]:
    """The cloud worker as `agentctl worker` builds it, on a queue of its own."""
    queue = f"scale-{uuid.uuid4().hex[:8]}"
    settings = b.ep.settings(workspace=b.state / "ws", task_queue=queue, provider="scripted")
    # One shared workspace root per tenant, so the bench can lay the files out beforehand.
    settings.agent = settings.agent.model_copy(update={"workspace_scope": "tenant"})
    acts = cloud_activities(settings, b.res, provider, default_registry())
    return build_cloud_worker(b.client, acts, task_queue=queue), queue


# -- 1. the step loop ---------------------------------------------------------------------------


def step_script(prefix: str, steps: int) -> list[dict[str, Any]]:
    return [
        {
            "text": f"Reading part {i} next.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": f"{prefix}/{i:04d}.txt"}}],
        }
        for i in range(steps)
    ]


def write_parts(b: Bench, tenant: str, prefix: str, steps: int, size: int) -> None:
    folder = b.state / "ws" / tenant / TENANT_DIR / prefix
    folder.mkdir(parents=True)
    for i in range(steps):
        (folder / f"{i:04d}.txt").write_text(seeded_text(i, size, seed=f"{tenant}:{prefix}"))


async def run_session(b: Bench, tenant: str, prefix: str, steps: int) -> list[str]:
    """One task of `steps` model+tool steps and a final answer, on a worker of its own."""
    worker, queue = worker_for(b, ScriptedProvider.from_data(step_script(prefix, steps)))
    options = TaskOptions(tenant_id=tenant, max_steps=steps + 5, task_queue=queue)
    async with running(worker):
        handle = await start_task(b.client, b.res.sessions, f"{prefix}: read every part.", options)
        result = await asyncio.wait_for(handle.result(), 900)
    if result.status != "completed":
        raise RuntimeError(f"{prefix}: ended {result.status}")
    return [handle.id]


async def archive_all(b: Bench, tenant: str, workflow_ids: list[str]) -> list[str]:
    for wid in workflow_ids:
        sid = uuid.UUID(wid.removeprefix("agent-"))
        await archive_session(b.res.sessions, b.res.store, tenant, sid)
    return []


async def step_profile(b: Bench, size: int, n1: int, n2: int) -> None:
    tenant = f"steps-{size}"
    write_parts(b, tenant, "a", n1, size)
    write_parts(b, tenant, "b", n2, size)
    a = await b.phase(
        f"R={size}: one session of {n1} steps", n1, "step",
        lambda: run_session(b, tenant, "a", n1),
    )  # fmt: skip
    c = await b.phase(
        f"R={size}: one session of {n2} steps", n2, "step",
        lambda: run_session(b, tenant, "b", n2),
    )  # fmt: skip
    steps = n2 - n1
    per_step = c.minus(a, f"R={size}: PER STEP, hot = ({n2}-step - {n1}-step session)", steps)
    b.add(per_step)
    fixed = a.minus(per_step.scaled(n1 / steps), f"R={size}: PER SESSION, fixed part, hot", 1)
    fixed.unit = "session"
    b.add(fixed)
    arch_a = await b.phase(
        f"R={size}: archive the {n1}-step session", 1, "session",
        lambda: archive_all(b, tenant, a.workflow_ids),
    )  # fmt: skip
    arch_c = await b.phase(
        f"R={size}: archive the {n2}-step session", 1, "session",
        lambda: archive_all(b, tenant, c.workflow_ids),
    )  # fmt: skip
    # What archiving moves per step, and what a step still costs in PostgreSQL once archived
    # (rows that stay: artifacts and their refs, the effects ledger, ...).
    moved = arch_c.minus(arch_a, f"R={size}: PER STEP, archive moves", steps)
    moved.unit = "step"
    b.add(moved)
    left = per_step.plus(moved, f"R={size}: PER STEP, left in PG/S3 once archived")
    b.add(left)
    print(residue_text(left), flush=True)


def residue_text(p: Phase) -> str:
    """The rows a step leaves in PostgreSQL for good once archived, and their bytes (data
    only: pg_column_size, without index entries and page overhead), by table."""
    tables = sorted(k[3:-5] for k in p.values if k.startswith("pg.") and k.endswith(".rows"))
    stays = [
        f"{t} {p.per(f'pg.{t}.rows'):.2f} rows / {p.per(f'pg.{t}.row_bytes'):,.0f} B"
        for t in tables
        if p.per(f"pg.{t}.rows") >= 0.05
    ]
    rows, data = p.sum_per("pg.", ".rows"), p.sum_per("pg.", ".row_bytes")
    return f"{p.name}: RESIDUE {rows:.2f} rows, {data:,.0f} B per step ({'; '.join(stays)})"


# -- 2. parked on approval ----------------------------------------------------------------------


async def parked_profile(b: Bench, k: int) -> None:
    tenant = "parked"
    worker, queue = worker_for(b, worker_provider(k))
    options = TaskOptions(
        tenant_id=tenant, max_steps=6, task_queue=queue, approval_policies={"write_file": "always"}
    )
    sids: list[str] = []
    gate = asyncio.Semaphore(10)

    async def start(i: int) -> None:
        async with gate:
            handle = await start_task(b.client, b.res.sessions, task_text(i), options)
            sids.append(handle.id.removeprefix("agent-"))

    async def park() -> list[str]:
        await asyncio.gather(*(start(i) for i in range(k)))
        await until_status(b, tenant, "waiting_approval", k)
        return [f"agent-{s}" for s in sids]

    async def query() -> list[str]:
        # Temporal Cloud bills a query received by a worker; the dev server's counter skips
        # them and histories never show them, so the bench counts its own.
        b.queries += len(sids)
        for sid in sids:
            st = await live_status(b.client, sid)
            if [p.tool_call_id for p in st.pending_approvals] != [CALL_ID]:
                raise RuntimeError(f"{sid}: not parked on one approval: {st.status}")
        return []

    async def approve_one(sid: str) -> None:
        async with gate:
            service = TaskService(b.client, b.res.sessions, b.res.store, Settings())
            await service.approve(Caller.operator(tenant, "bench"), sid, CALL_ID)

    async def finish() -> list[str]:
        await asyncio.gather(*(approve_one(s) for s in sids))
        await until_status(b, tenant, "completed", k)
        return [f"agent-{s}" for s in sids]  # the whole history, start to end

    async def inbox() -> list[str]:
        b.queries += await inbox_reads(b, tenant, k)
        return []

    async with running(worker):
        parked = await b.phase(f"parked x{k}: start -> all parked", k, "session", park)
        await b.phase(f"parked x{k}: one status query each", k, "session", query)
        await b.phase(
            f"parked x{k}: the web page's inbox, {INBOX_READS} refreshes (GET /v1/approvals)",
            INBOX_READS, "refresh", inbox,
        )  # fmt: skip
        done = await b.phase(
            f"parked x{k}: approve -> all completed (history: whole workflow)", k, "session", finish
        )
    # The approve phase's histories are whole workflows; the part after parking is the rest.
    rest = done.minus(parked, f"parked x{k}: approve -> completed, history part only", k)
    rest.values = {h: n for h, n in rest.values.items() if h.startswith("history.")}
    b.add(rest)
    await b.phase(
        f"parked x{k}: archive all", k, "session",
        lambda: archive_all(b, tenant, done.workflow_ids),
    )  # fmt: skip


async def vacuum(b: Bench, units: int) -> None:
    async def work() -> list[str]:
        await vacuum_full(b.owner, HOT_TABLES)
        return []

    await b.phase("VACUUM FULL of the hot tables (pages of archived rows freed)", units,
                  "session", work)  # fmt: skip


INBOX_READS = 3


async def inbox_reads(b: Bench, tenant: str, k: int) -> int:
    """GET /v1/approvals on the real gateway app, as the web page's 3-second refresh sends it;
    returns the Temporal queries it made (the route queries each waiting session)."""
    from durable_agents.workers.gateway.app import create_app  # only this phase needs FastAPI

    settings = b.ep.settings(workspace=b.state / "ws", task_queue="unused", provider="scripted")
    settings.gateway = GatewaySettings(rate_per_second=1000, burst=1000)
    app = create_app(b.res, b.client, settings)
    async with b.res.sessions() as db, db.begin():
        key = (await ApiKeyRepository(db).create(tenant, "bench", ["read"])).key
    transport = httpx.ASGITransport(app=app)
    port = b.stack.temporal.metrics_port
    before = (await settled_actions(port)).get("grpc_QueryWorkflow", 0)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        for _ in range(INBOX_READS):
            page = await http.get(
                "/v1/approvals", params={"limit": k}, headers={"Authorization": f"Bearer {key}"}
            )
            page.raise_for_status()
            if len(page.json()["entries"]) != k:
                raise RuntimeError(f"inbox shows {len(page.json()['entries'])} of {k}")
    after = (await settled_actions(port)).get("grpc_QueryWorkflow", 0)
    return after - before


async def until_status(b: Bench, tenant: str, status: str, want: int, limit_s: float = 900) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        async with b.owner.connect() as conn:
            n = await conn.scalar(
                text("SELECT count(*) FROM sessions WHERE tenant_id = :t AND status = :s"),
                {"t": tenant, "s": status},
            )
        if int(n or 0) >= want:
            return
        await asyncio.sleep(0.25)
    raise TimeoutError(f"{want} sessions of {tenant} not {status} within {limit_s:g}s")


# -- driver -------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> list[Phase]:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    async with open_bench() as b:
        # Every table's and index's first pages land on whichever session comes first: a
        # warm-up session takes them, so the measured sessions grow the tables as later
        # ones would.
        write_parts(b, "warmup", "w", 3, 2_000)
        await run_session(b, "warmup", "w", 3)
        for size in sizes:
            await step_profile(b, size, args.n1, args.n2)
        if args.parked:
            await parked_profile(b, args.parked)
        await vacuum(b, 1)
    print()
    print(summary(b.phases))
    return b.phases


def arguments() -> argparse.ArgumentParser:
    """The command line (docs/SCALE.md's commands are parsed with it in the tests)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,20000", help="tool result bytes, comma-separated")
    parser.add_argument("--n1", type=int, default=10, help="steps of the shorter session")
    parser.add_argument("--n2", type=int, default=110, help="steps of the longer session")
    parser.add_argument("--parked", type=int, default=100, help="sessions parked on approval")
    parser.add_argument("--json", help="also write every phase's numbers to this file")
    return parser


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    args = arguments().parse_args()
    phases = asyncio.run(main(args))
    if args.json:
        Path(args.json).write_text(json.dumps([p.as_json() for p in phases], indent=2))
