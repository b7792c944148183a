"""`agentctl worker --processes N` (workers/process/prefork.py): one process imports the worker's
code, then forks N whole cloud workers on one task queue; a stop reaches all of them, and a
child that dies takes the group down so its supervisor restarts it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.helpers import start
from tests.support.processes import AGENTCTL, REPO, WorkerProcess


def children_of(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            kids.append(int(entry))
    return sorted(kids)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


async def started_group(worker: WorkerProcess, processes: int) -> list[int]:
    """Wait until `processes` forked workers poll; their pids."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert worker.proc is not None
        if worker.proc.poll() is not None:
            raise AssertionError(f"worker group exited early:\n{worker.log.read_text()[-3000:]}")
        if worker.log.read_text().count("cloud worker on") >= processes:
            return children_of(worker.proc.pid)
        await asyncio.sleep(0.2)
    raise AssertionError(f"worker group did not start:\n{worker.log.read_text()[-3000:]}")


async def poller_pids(client: Client, queue: str) -> set[int]:
    """The pids in the identities (the SDK's default, pid@host) polling `queue`."""
    reply = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return {int(p.identity.split("@", 1)[0]) for p in reply.pollers}


def forked_worker(
    ep: StackEndpoints, tmp_path: Path, workspace: Path, processes: int
) -> WorkerProcess:
    return WorkerProcess(
        ep,
        queue=f"forked-{uuid.uuid4().hex[:8]}",
        workspace=workspace,
        log=tmp_path / "worker.log",
        script=[{"tool_calls": [{"name": "list_files", "arguments": {}}]}],
        command=[str(AGENTCTL), "worker", "--processes", str(processes)],
    )


async def test_forked_workers_each_poll_the_queue_run_tasks_and_stop_on_sigterm(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    worker = forked_worker(migrated, tmp_path, workspace, 2)
    try:
        worker.start()
        kids = await started_group(worker, 2)
        assert len(kids) == 2, kids
        # The parent became the small supervisor: it holds no copy of the workers' pages.
        assert worker.proc is not None
        parent = cmdline(worker.proc.pid)
        assert any(arg.endswith("workers/process/prefork_supervisor.py") for arg in parent), parent
        assert rss_mib(worker.proc.pid) < 30
        # Each child is a whole worker with a client of its own, polling the one queue.
        for _ in range(100):
            if await poller_pids(client, worker.env["AGENT_TASK_QUEUE"]) >= set(kids):
                break
            await asyncio.sleep(0.2)
        assert await poller_pids(client, worker.env["AGENT_TASK_QUEUE"]) >= set(kids)

        handles = [
            (await start(client, resources, worker.env["AGENT_TASK_QUEUE"], tenant=tenant))[1]
            for _ in range(4)
        ]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
        assert [r.status for r in results] == ["completed"] * 4

        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.proc.wait, 30) == 0
        assert not any(alive(k) for k in kids)
    finally:
        worker.stop()


async def test_a_worker_process_that_dies_stops_the_group_with_its_status(
    migrated: StackEndpoints, workspace: Path, tmp_path: Path
) -> None:
    worker = forked_worker(migrated, tmp_path, workspace, 2)
    try:
        worker.start()
        lost, other = await started_group(worker, 2)
        os.kill(lost, signal.SIGKILL)  # as the OOM killer would
        assert worker.proc is not None
        # 128 + 9: the supervisor sees the group fail the way the child did.
        assert await asyncio.to_thread(worker.proc.wait, 30) == 128 + signal.SIGKILL
        assert not alive(other)
        assert "exited with status 137: stopping the others" in worker.log.read_text()
    finally:
        worker.stop()


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_children_get_their_index_the_frozen_imports_and_the_tokenizer(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    done = run_python(
        f"""
        import gc, time
        from pathlib import Path
        from durable_agents.vocabulary.tokens import get_encoding
        from durable_agents.workers.process.prefork import run_forked

        def serve(i):
            out = Path({str(out)!r})
            # The imports are frozen and the tokenizer was loaded before the fork (shared).
            shared = gc.get_freeze_count() > 0 and get_encoding.cache_info().currsize == 1
            (out / str(i)).write_text(str(shared))
            if i == 1:
                deadline = time.monotonic() + 20
                while not (out / "0").exists() and time.monotonic() < deadline:
                    time.sleep(0.01)  # (the other has written its file too)
                raise SystemExit(3)  # a refused start
            time.sleep(30)  # the other keeps serving until stopped

        run_forked(2, serve, encoding="cl100k_base")
        """
    )
    assert done.returncode == 3, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["0", "1"]
    assert {p.read_text() for p in out.iterdir()} == {"True"}


def test_forking_is_refused_once_a_thread_runs_or_for_no_processes() -> None:
    threaded = run_python(
        """
        import threading, time
        from durable_agents.workers.process.prefork import run_forked

        threading.Thread(target=time.sleep, args=(10,), daemon=True).start()
        run_forked(2, lambda i: print("forked", i))
        """
    )
    assert threaded.returncode == 1
    assert "worker processes must be forked before any thread starts" in threaded.stderr
    assert "forked" not in threaded.stdout

    none = run_python(
        "from durable_agents.workers.process.prefork import run_forked; run_forked(0, print)"
    )
    assert "--processes must be at least 1 (got 0)" in none.stderr

    bare = run_python(
        "import runpy; runpy.run_path('workers/process/prefork_supervisor.py', run_name='__main__')"
    )
    assert bare.returncode == 2 and "usage: prefork_supervisor.py PID..." in bare.stderr

    cli = subprocess.run(
        [str(AGENTCTL), "worker", "--processes", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},  # the error box wraps at the terminal's width
    )
    assert cli.returncode == 2
    assert "Invalid value for '--processes'" in cli.stderr
    assert "greater than or equal to 1" in cli.stderr


def test_children_stop_when_their_parent_is_killed_outright(tmp_path: Path) -> None:
    out = tmp_path / "pids"
    out.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import os, time
                from pathlib import Path
                from durable_agents.workers.process.prefork import run_forked

                def serve(i):
                    Path({str(out)!r}, str(os.getpid())).touch()
                    time.sleep(60)

                run_forked(2, serve)
                """
            ),
        ],
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(out.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        kids = [int(p.name) for p in out.iterdir()]
        assert len(kids) == 2 and all(alive(k) for k in kids)
        proc.kill()  # SIGKILL: the parent runs no handler at all
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(k) for k in kids)
    finally:
        proc.kill()
