"""Test-only workflows whose code changes between the run and `deploy check`: three
versions of one workflow type, as three deploys of it would be."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

PROBE = "DeployCheckProbe"
STEP = timedelta(milliseconds=1)


class _Waits:
    def __init__(self) -> None:
        self.done = False

    @workflow.signal
    def finish(self) -> None:
        self.done = True


@workflow.defn(name=PROBE)
class ProbeDeployed(_Waits):
    """What ran: a timer, then a wait for `finish`."""

    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(STEP)
        await workflow.wait_condition(lambda: self.done)
        return "done"


@workflow.defn(name=PROBE)
class ProbeChanged(_Waits):
    """A deploy that swapped the timer for an activity without a patch."""

    @workflow.run
    async def run(self) -> str:
        await workflow.execute_activity("probe_step", start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: self.done)
        return "done"


@workflow.defn(name=PROBE)
class ProbePatched(_Waits):
    """The same change behind workflow.patched: runs that took the timer keep it."""

    @workflow.run
    async def run(self) -> str:
        if workflow.patched("probe-activity"):
            await workflow.execute_activity("probe_step", start_to_close_timeout=STEP)
        else:
            await workflow.sleep(STEP)
        await workflow.wait_condition(lambda: self.done)
        return "done"


@workflow.defn(name="AgentWorkflow")
class ForeignAgentWorkflow(_Waits):
    """A run recorded under the loop's type name by other code: what a history written by
    an incompatible older loop looks like to the current one."""

    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(STEP)
        await workflow.wait_condition(lambda: self.done)
        return "done"
