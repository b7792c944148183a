"""SIGKILL the worker between an effectful tool's effect and its commit, wave after wave:
a call is never executed twice without a person approving in between, every task
finishes, and the in-doubt result, the decision and the ledger are in AgentState. A tool
with a `reconcile` is settled from it instead: exactly one execution, committed reconciled.

The tool (tests/support/effect_tools.py) counts its executions outside the system, in a
file the engine never touches; after its effect it blocks, and the harness kills the
worker process once every call of the wave is blocked there.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from temporalio.client import Client, WorkflowHandle

from durable_agents.activities.context.assembly import ContextBudget, assemble_context
from durable_agents.storage.models import ItemRow
from durable_agents.storage.tool_effects import ToolEffectRepository
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support import verbs
from tests.support.chaos import Audit, fail_attempts_of_dead_worker, results_of, summarise
from tests.support.effect_tools import executions
from tests.support.effect_worker import COUNT_FILE_ENV, RECONCILED_TASK
from tests.support.helpers import items_of, start
from tests.support.processes import WorkerProcess

WAVES = 2
IN_DOUBT_PER_WAVE = 26  # 52 runs of the tool without reconcile
RECONCILED_PER_WAVE = 6  # 12 runs of the tool with one
START_TIMEOUT = 90
APPROVAL_TIMEOUT_SECONDS = 3
Plan = Literal["approve", "reject", "timeout", "reconciled"]
# Each in-doubt run's fate, in turn: a person approves the re-run, rejects it, or never answers.
PLANS: tuple[Plan, ...] = ("approve", "reject", "timeout")


@dataclass
class _Run:
    session_id: str
    handle: WorkflowHandle[Any, Any]
    plan: Plan
    status: str = ""
    decided: bool = False

    @property
    def key(self) -> str:
        # The loop's key of the one tool call (step 0, the scripted model's call id).
        return f"agent-{self.session_id}:0:call_0_0"


@dataclass
class _Tally:
    kills: int = 0
    dead_attempts_failed: int = 0
    runs: list[_Run] = field(default_factory=list)


async def _wait_blocked(count_file: Path, keys: set[str], within: float = 60) -> None:
    """Until every key has executed: each of those calls now blocks after its effect."""
    async with asyncio.timeout(within):
        while True:
            if keys <= set(executions(count_file)):
                return
            await asyncio.sleep(0.05)


async def _decide(
    client: Client, res: Resources, tenant: str, runs: list[_Run], count_file: Path
) -> None:
    """Act as the people asked: approve or reject re-runs as planned; let others time out.
    Fails at once if a key runs twice (a re-run has a key of its own)."""
    while not all(r.decided or r.plan in ("timeout", "reconciled") for r in runs):
        twice = [k for k, n in executions(count_file).items() if n > 1]
        assert twice == [], f"executed twice under one key, nobody asked: {twice}"
        for run in runs:
            if run.decided or run.plan in ("timeout", "reconciled"):
                continue
            live = await tasks.live_status(client, run.session_id)
            if not any(p.rerun for p in live.pending_approvals):
                continue
            decide = dict(sessions=res.sessions, tenant_id=tenant)
            if run.plan == "approve":
                await verbs.approve(client, run.session_id, "call_0_0", "ops", **decide)
            else:
                await verbs.reject(client, run.session_id, "call_0_0", "not again", "ops", **decide)
            run.decided = True
        await asyncio.sleep(0.1)


async def _wave(
    wave: int,
    worker: WorkerProcess,
    client: Client,
    res: Resources,
    tenant: str,
    count_file: Path,
    tally: _Tally,
) -> None:
    queue = worker.env["AGENT_TASK_QUEUE"]
    plans: list[Plan] = [
        PLANS[i % len(PLANS)] if i < IN_DOUBT_PER_WAVE else "reconciled"
        for i in range(IN_DOUBT_PER_WAVE + RECONCILED_PER_WAVE)
    ]

    async def one(i: int, plan: Plan) -> _Run:
        text = f"{RECONCILED_TASK} wave {wave} run {i}" if plan == "reconciled" else f"w{wave} {i}"
        session_id, handle = await start(
            client,
            res,
            queue,
            text,
            tenant=tenant,
            tool_timeout_seconds=120,
            approval_timeout_seconds=APPROVAL_TIMEOUT_SECONDS if plan == "timeout" else 120,
        )
        return _Run(session_id, handle, plan)

    runs = list(await asyncio.gather(*(one(i, p) for i, p in enumerate(plans))))
    await _wait_blocked(count_file, {r.key for r in runs})
    assert worker.proc is not None
    pid = worker.proc.pid
    worker.kill()  # every call of the wave sits between its effect and its commit
    tally.kills += 1
    tally.dead_attempts_failed += await fail_attempts_of_dead_worker(
        client, [r.handle for r in runs], pid
    )
    worker.start()
    await asyncio.to_thread(worker.wait_started, START_TIMEOUT)
    await asyncio.wait_for(_decide(client, res, tenant, runs, count_file), 90)
    for run, status in zip(runs, await results_of([r.handle for r in runs], 90), strict=True):
        run.status = status
    tally.runs += runs


async def _told(items: list[ItemRow]) -> list[str]:
    """The tool messages the next model call would read (context assembly, previews only)."""

    async def no_fetch(artifact_id: uuid.UUID, max_bytes: int) -> tuple[bytes, str]:
        raise AssertionError("budget too small to expand")

    assembled = await assemble_context(
        items,
        system_prompt="s",
        tools=[],
        budget=ContextBudget(context_tokens=4000, tool_result_tokens=1),
        fetch=no_fetch,
    )
    return [m.content for m in assembled.messages if m.role == "tool"]


async def _check(res: Resources, tenant: str, run: _Run, counted: Counter[str]) -> list[str]:
    """What is wrong with one run (empty: all holds)."""
    problems: list[str] = []
    items = await items_of(res, tenant, run.session_id)
    async with res.sessions() as db:
        ledger = {
            r.idempotency_key: r.state
            for r in await ToolEffectRepository(db, tenant).for_session(uuid.UUID(run.session_id))
        }
    results = [i for i in items if i.kind == "tool_result"]
    decisions = [i for i in items if i.kind == "approval" and "approved" in i.data]
    approved_reruns = sum(1 for d in decisions if d.data.get("rerun") and d.data["approved"])
    ran = {k: n for k, n in counted.items() if k.startswith(run.key)}
    # The guarantee: never two executions of one call without an approval in between.
    if sum(ran.values()) > 1 + approved_reruns or any(n > 1 for n in ran.values()):
        problems.append(f"executions {ran} with {approved_reruns} approved re-runs")
    if run.status != "completed":
        problems.append(f"status {run.status}")
    told = await _told(items)
    if len(told) != 1:
        problems.append(f"{len(told)} tool messages for one call")
    if run.plan == "reconciled":
        expected_ledger = {run.key: "reconciled"}
        if ran != {run.key: 1} or [r.data.get("effect") for r in results] != ["reconciled"]:
            problems.append(f"reconcile: ran {ran}, results {[r.data for r in results]}")
        if decisions:
            problems.append("a reconciled call asked a person")
    else:
        rerun = f"{run.key}:rerun1"
        approve = run.plan == "approve"
        expected_ledger = {run.key: "in_doubt", **({rerun: "completed"} if approve else {})}
        if ran != {run.key: 1, **({rerun: 1} if approve else {})}:
            problems.append(f"{run.plan}: executions {ran}")
        effects = [(r.idempotency_key, r.data.get("effect")) for r in results]
        final = "completed" if approve else "in_doubt"
        if effects != [(run.key, "in_doubt"), (rerun, final)]:
            problems.append(f"{run.plan}: results {effects}")
        if [d.data["approved"] for d in decisions if d.data.get("rerun")] != [approve]:
            problems.append(f"{run.plan}: decisions {[d.data for d in decisions]}")
        if told and "may or may not have taken effect" not in told[0]:
            problems.append(f"{run.plan}: the model was not told: {told[0][:200]}")
    if ledger != expected_ledger:
        problems.append(f"ledger {ledger}")
    return [f"{run.session_id} ({run.plan}): {p}" for p in problems]


async def test_effectful_calls_killed_between_effect_and_commit_never_run_twice_silently(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_stack: StackEndpoints,
    tmp_path: Path,
    tenant: str,
) -> None:
    began = time.monotonic()
    count_file = tmp_path / "executions.txt"  # outside the system: no engine code knows it
    worker = WorkerProcess(
        chaos_stack,
        queue=f"effects-{uuid.uuid4().hex[:8]}",
        workspace=tmp_path / "ws",
        script=[],
        log=tmp_path / "worker.log",
        command=[sys.executable, "-m", "tests.support.effect_worker"],
        env={COUNT_FILE_ENV: str(count_file)},
    )
    tally = _Tally()
    worker.start()
    try:
        await asyncio.to_thread(worker.wait_started, START_TIMEOUT)
        for wave in range(WAVES):
            await _wave(wave, worker, chaos_client, chaos_resources, tenant, count_file, tally)
    finally:
        worker.stop()
    elapsed = time.monotonic() - began

    counted = executions(count_file)
    problems = [
        p for run in tally.runs for p in await _check(chaos_resources, tenant, run, counted)
    ]
    plans = Counter(r.plan for r in tally.runs)
    audit = Audit(runs=len(tally.runs), completed=sum(r.status == "completed" for r in tally.runs))
    summarise(
        "effects_sigkill",
        audit,
        elapsed,
        kills=tally.kills,
        dead_attempts_failed=tally.dead_attempts_failed,
        executions=sum(counted.values()),
        **{f"plan_{k}": v for k, v in sorted(plans.items())},
        problems=len(problems),
    )
    assert plans["reconciled"] >= 10 and len(tally.runs) - plans["reconciled"] >= 50
    assert problems == []
