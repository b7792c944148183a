"""What one AgentWorkflow run costs the worker before its first event: the sandbox that runs
it, with our workflow modules re-imported per run (strict) or shared with the host.

    .venv/bin/python bench/workflow_memory.py [--runs 50]

Builds runs the way the SDK's worker does (`SandboxedWorkflowRunner.create_instance`, the
call `prepare_workflow` makes with placeholder info), holds `--runs` of them at once as a
workflow cache would, and reports per run: the Python memory they hold (tracemalloc), the
CPU to build one, and the modules it imported itself rather than took from the host. No
server is needed; the parked-session numbers with a real worker are bench/parked_approvals.py
(AGENT_WORKFLOW_SANDBOX, --max-cached).

Then what waking a run that is no longer cached costs: the SDK's Replayer replays the
recorded histories of tests/histories/ (23 to 102 events; a session parked on approval has
about 20) in each sandbox, CPU per replay (`--replays` each).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import temporalio.converter
import temporalio.workflow
from temporalio.api.common.v1.message_pb2 import Payloads
from temporalio.api.failure.v1.message_pb2 import Failure
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox._runner import _fake_info, _Instance

from durable_agents.workers.process.sandbox import SHARED_WORKFLOW_MODULES, workflow_runner
from durable_agents.workflows.agent import AgentWorkflow

HISTORIES = Path(__file__).resolve().parent.parent / "tests" / "histories"


def _details() -> WorkflowInstanceDetails:
    converter = temporalio.converter.DataConverter.default
    return WorkflowInstanceDetails(
        payload_converter_factory=converter._new_payload_converter,
        failure_converter_class=converter.failure_converter_class,
        interceptor_classes=[],
        defn=temporalio.workflow._Definition.must_from_class(AgentWorkflow),
        info=_fake_info,
        randomness_seed=-1,
        extern_functions={},
        disable_eager_activity_execution=False,
        worker_level_failure_exception_types=[],
        patch_activation_callback=None,
        last_completion_result=Payloads(),
        last_failure=Failure(),
    )


def own_modules(instance: WorkflowInstance) -> list[str]:
    """Modules this run imported itself (a copy of its own, not the host's object)."""
    if not isinstance(instance, _Instance):
        return []
    modules = instance.importer.new_modules
    return sorted(
        name
        for name, mod in modules.items()
        if name != "__main__"
        and sys.modules.get(name) is not mod
        and not type(mod).__name__.startswith("Restricted")
    )


async def measure(shared: Sequence[str], runs: int) -> tuple[float, float, list[str]]:
    """(KiB held per run, CPU ms to build one, modules each run imports itself)."""
    runner: SandboxedWorkflowRunner = workflow_runner(shared)
    first = runner.create_instance(_details())  # warms the host's imports
    gc.collect()
    tracemalloc.start()
    cpu = time.process_time()
    held = [runner.create_instance(_details()) for _ in range(runs)]
    cpu = time.process_time() - cpu
    gc.collect()
    traced, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del held
    return traced / runs / 1024, cpu / runs * 1000, own_modules(first)


async def replay_ms(shared: Sequence[str], history: WorkflowHistory, replays: int) -> float:
    """CPU ms to replay `history` from scratch, as a worker does for an evicted run."""
    replayer = Replayer(workflows=[AgentWorkflow], workflow_runner=workflow_runner(shared))
    await replayer.replay_workflow(history)  # warm: the host's imports, the core's setup
    cpu = time.process_time()
    for _ in range(replays):
        await replayer.replay_workflow(history)
    return (time.process_time() - cpu) / replays * 1000


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=50, help="runs held at once (50)")
    parser.add_argument("--replays", type=int, default=5, help="replays per history (5)")
    args = parser.parse_args(argv)
    print(f"AgentWorkflow, {args.runs} runs held at once")
    for label, shared in (("strict", ()), ("shared", SHARED_WORKFLOW_MODULES)):
        kib, ms, own = await measure(shared, args.runs)
        print(f"  {label:<7} {kib:7.1f} KiB/run  {ms:7.2f} ms CPU/run  {len(own)} own modules")
        if own:
            print(f"          {', '.join(own)}")
    print(f"replay from scratch (a wake after eviction), CPU ms, {args.replays} replays each")
    for path in sorted(HISTORIES.glob("*.json")):
        history = WorkflowHistory.from_json(path.stem, path.read_text())
        strict_ms = await replay_ms((), history, args.replays)
        shared_ms = await replay_ms(SHARED_WORKFLOW_MODULES, history, args.replays)
        events = f"{len(history.events):4d} events"
        print(f"  {path.stem:<24} {events}  strict {strict_ms:7.1f}  shared {shared_ms:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
