"""The workflow sandbox a cloud worker runs AgentWorkflow in (AGENT_WORKFLOW_SANDBOX): none
(`off`, the default), the SDK's sandbox with our workflow modules shared with the host
(`shared`), or the SDK's own, re-importing and checking them in every run (`strict`).

The SDK's sandbox re-imports every module that is not passed through, in every workflow run
(`temporalio/worker/workflow_sandbox/_importer.py`): for AgentWorkflow that is `workflows`
and its modules plus the leaf vocabulary they use (artifact refs, previews), measured
at ~435 KiB of Python objects and 130-170 ms of CPU per run (bench/workflow_memory.py). A
cached workflow holds its copy for as long as it is cached, and a workflow evicted from the
cache pays the import again when it next wakes. Shared (and off), those modules are
imported once, by the host, and every run uses them: ~13 KiB and ~1 ms per run.

What sharing gives up: the sandbox checks module members (`datetime.now`, `random`, `uuid4`,
`asyncio.as_completed`, ...) through proxies it puts in the modules it imports itself; a
shared module keeps the host's real ones, so a clock read in `workflows/` is not caught at
run time. Builtins (`open`, `input`, `breakpoint`) stay restricted in both sandboxes. The
replay of every recorded history and the tests of an approval, a child, a continue-as-new
and the sandbox itself run strict (tests/conftest.py's agent worker runs shared unless a
test asks), and tests/test_workflow_sandbox.py checks the shared modules' source for
clock, random and uuid reads (and shows both sandboxes at work).
Sharing is safe only for modules without mutable module state that a run could change:
`workflows/` holds constants and pure functions, the per-run state lives on the workflow
instance.

Why `off` is the default: with every module our workflow code runs from shared, the sandbox
checks almost nothing in it (a shared module's globals are the host's; it still refuses
`open`, `input` and `breakpoint`, thread-locally while an activation runs), yet it costs
every activation and every payload's serialization context an `exec` behind its import
hooks: ~12 ms of worker CPU per approval and ~8 ms per park at 2,000 parked sessions
(`bench/parked_approvals.py --sessions 2000`; docs/BENCHMARKS.md, "The workflow cache and
the workflow sandbox"). Determinism is kept where it is actually checked: the source
check of the shared modules (clock, randomness and those three builtins), replay of
recorded histories (tests/test_replay.py, strict and as workers run) and the tests that
run strict.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.worker import UnsandboxedWorkflowRunner, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from durable_agents.workers.settings import SandboxMode

# Our deterministic code that workflow runs import: `workflows` (the loop, its helpers, the
# payload contracts) and the leaf vocabulary the contracts re-export. Activities are already
# passed through where the workflows import them.
SHARED_WORKFLOW_MODULES = ("durable_agents.workflows", "durable_agents.vocabulary")


def workflow_runner(
    shared_modules: Sequence[str] = SHARED_WORKFLOW_MODULES,
) -> SandboxedWorkflowRunner:
    """The SDK's sandbox with its default restrictions, `shared_modules` (and their
    submodules) passed through from the host; `()` is the SDK's own strict default."""
    restrictions = SandboxRestrictions.default
    if shared_modules:
        restrictions = restrictions.with_passthrough_modules(*shared_modules)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def runner_for(mode: SandboxMode) -> WorkflowRunner:
    """The runner a cloud worker runs its workflows in for `mode` (AGENT_WORKFLOW_SANDBOX)."""
    if mode == "off":
        return UnsandboxedWorkflowRunner()
    return workflow_runner(() if mode == "strict" else SHARED_WORKFLOW_MODULES)
