"""Many agent sessions parked on approval at once: start N, wait until every one is parked,
approve them all, wait until every one has finished, and measure the worker on the way.

Each session's scripted model asks for one `write_file` call (approval policy "always") to
its own file, out/sNNNNN.txt, and finishes after the tool result. The cloud worker runs in its
own process (bench/parked_worker.py; the /proc readings are bench/proc_stats.py), so its
memory is measured apart from the client that starts, queries and approves the sessions.
Everything runs against a throwaway embedded stack (Temporal dev server, PostgreSQL,
SeaweedFS) on free ports.

    .venv/bin/python bench/parked_approvals.py --sessions 20      # smoke run
    .venv/bin/python bench/parked_approvals.py                    # 1,000 sessions
    .venv/bin/python bench/parked_approvals.py --workers 2        # two worker processes
    .venv/bin/python bench/parked_approvals.py --bare             # and Temporal's own floor
    .venv/bin/python bench/parked_approvals.py --park-only        # stop once all are parked
    .venv/bin/python bench/parked_approvals.py --park-only --keep DIR   # ... and keep the stack
    .venv/bin/python bench/parked_approvals.py --resume DIR       # later: restart it, approve

With --keep DIR the stack's state stays in DIR; --resume DIR starts that stack again (new
ports, empty worker caches) and carries on with the sessions the first half started
(bench/parked_resume.py): every parked run is then woken from Temporal's store.

With --bare, the same number of bare runs (bench/bare_worker.py: the same commands, trivial
activities, nothing of ours) follow on the same stack, with the same worker processes and
cache, and CPU per approval is reported for both and as ours / bare, process by process.

With --workers N, N worker processes poll the one task queue; worker RSS and CPU are then
summed over all of them. With --forked N, one worker process forks N after its imports, as
`agentctl worker --processes N` does (workers/process/prefork.py); they share the imported pages, so
their memory is measured as PSS (each shared page counted once) as well as summed RSS
(counting it once per process).

Phases (all wall-clock, from this process):
  start     every start_task returned (session + first message committed, workflow started)
  parked    every session's AgentState status is waiting_approval (PostgreSQL, polled)
  query     the `status` query answered for every session, each with one pending approval
  approve   every `approve` update returned
  complete  every session's AgentState status is completed (then each workflow's result read)
Verified afterwards (bench/parked_checks.py): each workflow completed, each session has
exactly one tool_result and one approval decision, and exactly one file per session was
written to the tenant's shared workspace, with the expected content.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import uuid
import warnings
from pathlib import Path

from bare_phase import run_bare
from bounded_calls import bounded
from parked_checks import verify_files, verify_items  # bench/ is on sys.path as a script
from parked_phases import start_all, wait_for_status
from parked_report import Report, note_errors, print_report, secs
from parked_resume import KeptRun, check_keep_dir, kept_sessions, load_run, save_run
from parked_worker import (
    WorkerGroup,
    WorkerProcess,
)
from proc_stats import (
    CpuSnapshot,
    cpu_between,
    cpu_used,
    machine_facts,
    mib,
    proc_mem_kib,
    pss_by_group,
)
from stack_disk import per_session, stack_disk
from temporalio.client import Client
from throwaway_stack import bench_stack
from worker_metrics import cache_between, sql_between

from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.tasks import (
    TaskOptions,
    live_status,
    task_handle,
)
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import Settings
from durable_agents.workers.temporal_client import connect_client

CALL_ID = "call_0_0"  # ScriptedProvider: turn 0, first call
# Resumed: how long AgentState's counts stay unchanged before the rest are asked by query.
SETTLE_S = 60.0


async def run(args: argparse.Namespace, report: Report) -> None:
    """The whole bench; SIGTERM (e.g. from `timeout`) cancels it so the worker and the
    stack are still stopped, and the numbers so far are still printed."""
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    facts = machine_facts()  # before the stack starts: the load the run begins under
    for name, value in facts:
        print(f"{name}: {value}")
    report.rows.extend(facts)
    tenant, queue = args.tenant, args.queue
    began_stack = time.perf_counter()
    async with bench_stack(keep=args.keep or args.resume) as (ep, res, state):
        report.add("stack up", f"{time.perf_counter() - began_stack:.1f} s")
        workspace = state / "workspace"
        workspace.mkdir(exist_ok=args.resume is not None)
        if args.keep:
            save_run(state, KeptRun(tenant, queue, args.sessions))
        logs = f"-resumed-{int(time.time())}" if args.resume else ""
        worker = WorkerGroup(
            [
                WorkerProcess(
                    ep,
                    queue=queue,
                    workspace=workspace,
                    sessions=args.sessions,
                    max_cached=args.max_cached,
                    log=state / f"worker-{i}{logs}.log",
                    processes=args.forked,
                )
                for i in range(args.workers)
            ]
        )
        worker.start()
        try:
            await worker.wait_ready()
            await asyncio.sleep(1.0)  # let it settle into polling before the idle reading
            client = await connect_client(
                ep.temporal_address,
                "default",
                data_converter=data_converter_with_offload(res.store),
            )
            async with asyncio.timeout(args.budget):
                ours = await measure(args, report, res, client, worker, workspace, tenant, queue)
                worker.stop()
                if args.bare:
                    await run_bare(args, report, ep, state, ours)
        except TimeoutError:
            report.errors.append(f"run budget of {args.budget:g}s used up; numbers are partial")
        finally:
            worker.stop()


async def measure(
    args: argparse.Namespace,
    report: Report,
    res: Resources,
    client: Client,
    worker: WorkerGroup,
    workspace: Path,
    tenant: str,
    queue: str,
) -> dict[str, float]:
    """Our sessions' phases; returns the CPU seconds per process group from the first
    approval to the last completion."""
    n, conc = args.sessions, args.concurrency
    state = workspace.parent
    idle_rss, _ = worker.mem_kib()
    report.add("worker RSS idle (after start)", mib(idle_rss))
    report.add("worker PSS idle (after start)", mib(worker.pss_kib()))
    options = TaskOptions(
        tenant_id=tenant,
        max_steps=6,
        task_queue=queue,
        approval_policies={"write_file": "always"},
    )

    # 1. start N tasks (resumed: the ones the first half started)
    print("phase: start", flush=True)  # markers for whoever attaches a profiler mid-run
    t0 = time.perf_counter()
    cpu0 = CpuSnapshot.take(worker.pids, state)
    cache0 = worker.cache_counters()
    disk0 = stack_disk(state)
    parked: tuple[str, ...] = ("waiting_approval",)
    if args.resume:  # a resumed run may find some already approved: those are not again
        kept = await kept_sessions(res, tenant)
        ids = list(kept)
        done_before = sum(1 for st in kept.values() if st == "completed")
        parked = ("waiting_approval", "completed")  # one approved may still be finishing
        report.add(
            "sessions the first half started (AgentState)",
            f"{len(ids)}/{n}, {done_before} of them completed",
        )
        report.add(
            "disk per session, at the restart", per_session(dict.fromkeys(disk0, 0), disk0, n)
        )
    else:
        ids = await start_all(report, res, client, options, n, conc)

    # 2. until all parked on approval (AgentState status)
    # Resumed, a session may stay `running` in AgentState while its run waits for the call
    # (an approval recorded in a workflow task the stopped server lost): once the counts
    # settle, the status queries below tell.
    settle = SETTLE_S if args.resume else None
    ok, counts = await wait_for_status(
        res, tenant, parked, len(ids), args.timeout, worker, args.poll, settle
    )
    t_parked = time.perf_counter() - t0
    cpu_parked = CpuSnapshot.take(worker.pids, state)
    cache_parked = worker.cache_counters()
    report.add(
        f"all parked ({' or '.join(parked)}) since first start",
        f"{t_parked:.2f} s"
        if ok
        else f"{'settled' if settle else 'NOT REACHED'} in {t_parked:.0f} s at {counts}",
    )
    rss, hwm = worker.mem_kib()
    report.add("worker RSS with all parked", mib(rss))
    report.add(
        "worker RSS per parked session (over idle)",
        f"{(rss - idle_rss) / max(1, len(ids)):.1f} KiB",
    )
    report.add("worker peak RSS (VmHWM) so far", mib(hwm))
    report.add("worker PSS with all parked", mib(worker.pss_kib()))
    pss = pss_by_group(worker.pids, state)
    stack = {k: v for k, v in pss.items() if k not in ("worker", "client")}
    report.add(
        "stack PSS with all parked",
        ", ".join(f"{k} {mib(v)}" for k, v in sorted(stack.items(), key=lambda kv: -kv[1])),
    )
    report.add("client (this process) RSS", mib(proc_mem_kib(os.getpid())[0]))
    report.add("CPU, first start to all parked", cpu_between(cpu0, cpu_parked))
    report.add("worker cache, first start to all parked", cache_between(cache0, cache_parked, n))
    report.add("worker's PostgreSQL, start to parked", sql_between(cache0, cache_parked, n))
    report.add("disk per session started (allocated)", per_session(disk0, stack_disk(state), n))
    if args.park_only:
        return {}

    waiting = ids
    if args.resume:
        waiting = [
            sid for sid, st in (await kept_sessions(res, tenant)).items() if st != "completed"
        ]
    # 2b. each one's status query shows exactly one pending approval
    print("phase: query", flush=True)
    tq = time.perf_counter()
    cpu_query = CpuSnapshot.take(worker.pids, state)
    statuses, errors = await bounded(conc, waiting, lambda sid: live_status(client, sid))
    t_query = time.perf_counter() - tq
    # A query to a run that is no longer cached replays it first: this is what waking an
    # evicted parked session costs, before any new event is applied.
    cpu_queried = CpuSnapshot.take(worker.pids, state)
    report.add("CPU, status query x N", cpu_between(cpu_query, cpu_queried))
    note_errors(report, "status query", errors)
    pending_ok = sum(
        1
        for st in statuses
        if st is not None
        and st.status == "waiting_approval"
        and [p.tool_call_id for p in st.pending_approvals] == [CALL_ID]
    )
    report.add("status query x N", secs(t_query, len(waiting)))
    report.check(
        "parked per status query", pending_ok == len(waiting), f"{pending_ok}/{len(waiting)}"
    )

    # 3. approve all, then until all complete
    service = TaskService(client, res.sessions, res.store, Settings())
    bench_caller = Caller.operator(tenant, "bench")
    print("phase: approve", flush=True)
    ta = time.perf_counter()
    cpu_approve = CpuSnapshot.take(worker.pids, state)
    cache_approve = worker.cache_counters()
    decisions, errors = await bounded(
        conc,
        waiting,
        lambda sid: service.approve(bench_caller, sid, CALL_ID),
    )
    t_approve = time.perf_counter() - ta
    note_errors(report, "approve", errors)
    approved = sum(1 for d in decisions if d is not None and d.approved)
    report.add(f"approve {approved}/{len(waiting)} (updates returned)", secs(t_approve, approved))
    ok, counts = await wait_for_status(
        res, tenant, ("completed",), len(ids), args.timeout, worker, args.poll
    )
    t_complete = time.perf_counter() - ta
    cpu_done = CpuSnapshot.take(worker.pids, state)
    report.add(
        "all completed since first approval",
        f"{t_complete:.2f} s" if ok else f"NOT REACHED in {args.timeout:g}s: {counts}",
    )
    report.add("end to end (first start to last completion)", f"{time.perf_counter() - t0:.2f} s")
    report.add("CPU, first approval to all completed", cpu_between(cpu_approve, cpu_done))
    cache_done = worker.cache_counters()
    report.add(
        "worker cache, first approval to all completed",
        cache_between(cache_approve, cache_done, n),
    )
    report.add(
        "worker's PostgreSQL, first approval to all completed",
        sql_between(cache_approve, cache_done, n),
    )
    rss, hwm = worker.mem_kib()
    report.add("worker RSS at the end", mib(rss))
    report.add("worker peak RSS (VmHWM) over the run", mib(hwm))
    report.add("worker PSS at the end", mib(worker.pss_kib()))
    report.add("worker PSS, highest sampled (every 5 s)", mib(worker.peak_pss_kib))

    # 4. verify
    results, errors = await bounded(conc, ids, lambda sid: task_handle(client, sid).result())
    note_errors(report, "result", errors)
    done = sum(1 for r in results if r is not None and r.status == "completed")
    report.check("workflows completed", done == n, f"{done}/{n}")
    await verify_items(report, res, tenant, n, resumed=args.resume is not None)
    verify_files(report, workspace, tenant, n)
    report.add(
        "disk growth per session, first reading to the end",
        per_session(disk0, stack_disk(state), n),
    )
    return cpu_used(cpu_approve, cpu_done)


def arguments() -> argparse.ArgumentParser:
    """The command line (docs/SCALE.md's command is parsed with it in the tests)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000, help="sessions to park (1000)")
    parser.add_argument(
        "--concurrency", type=int, default=50, help="client calls in flight at once (50)"
    )
    parser.add_argument(
        "--max-cached",
        type=int,
        default=None,
        help="worker max_cached_workflows (AGENT_MAX_CACHED_WORKFLOWS)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="per waiting phase, seconds")
    parser.add_argument(
        "--budget", type=float, default=1140.0, help="stop measuring after this many seconds"
    )
    parser.add_argument("--poll", type=float, default=0.5, help="AgentState poll interval, s")
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes on the one task queue (1)"
    )
    parser.add_argument(
        "--forked",
        type=int,
        default=1,
        help="workers each worker process forks after its imports (1: none)",
    )
    parser.add_argument(
        "--bare", action="store_true", help="then the same runs bare, and ours / bare"
    )
    parser.add_argument(
        "--park-only",
        action="store_true",
        help="stop once every session is parked (its memory, CPU and disk read)",
    )
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep the stack's state in DIR (a new one)"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="restart the stack kept in DIR and carry on with its sessions",
    )
    parser.add_argument("--json", help="also write the numbers to this file")
    return parser


def main() -> int:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = arguments()
    args = parser.parse_args()
    if args.workers < 1 or args.forked < 1:
        parser.error("--workers and --forked must be at least 1")
    if args.bare and args.park_only:
        parser.error("--bare compares approvals, which --park-only does not run")
    if args.keep and args.resume:
        parser.error("--keep starts a new stack and --resume an old one: give one")
    args.tenant = f"parked-{uuid.uuid4().hex[:8]}"
    args.queue = f"parked-{uuid.uuid4().hex[:8]}"
    if args.keep:
        check_keep_dir(args.keep)
    if args.resume:
        kept = load_run(args.resume)
        args.tenant, args.queue, args.sessions = kept.tenant, kept.queue, kept.sessions
    report = Report(args.sessions, args.concurrency)
    try:
        asyncio.run(run(args, report))
    except (asyncio.CancelledError, KeyboardInterrupt):
        report.errors.append("interrupted; numbers are partial")
    print_report(report, args)
    return 0 if all(ok for _, ok, _ in report.checks) and not report.errors else 1


if __name__ == "__main__":
    sys.exit(main())
