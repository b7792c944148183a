"""A workflow that shows what the sandbox did with the modules it imports (for
tests/test_workflow_sandbox.py): which `workflows.contracts` it sees, and whether a clock
read in an imported helper gets through."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

import durable_agents.workflows.contracts
from tests.support.sandbox_clock import read_clock


@dataclass
class ProbeInput:
    read_clock: bool = False


@dataclass
class ProbeResult:
    # id() of the workflows.contracts module the run sees: the host's, or a copy of its own.
    contracts_module_id: int
    clock: str | None = None


@workflow.defn(name="SandboxProbe")
class SandboxProbe:
    @workflow.run
    async def run(self, inp: ProbeInput) -> ProbeResult:
        return ProbeResult(
            contracts_module_id=id(durable_agents.workflows.contracts),
            clock=read_clock() if inp.read_clock else None,
        )
