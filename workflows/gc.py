"""ArtifactGcWorkflow: one GC pass, run by a Temporal Schedule (`agentctl gc schedule`)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from durable_agents.workflows.contracts import GcInput, GcResult

with workflow.unsafe.imports_passed_through():
    # Passed through: only the method reference is needed, not its SQL/S3 dependencies.
    from durable_agents.activities.gc import GcActivities

GC_TIMEOUT = timedelta(hours=1)
GC_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(minutes=1))


@workflow.defn(name="ArtifactGcWorkflow")
class ArtifactGcWorkflow:
    @workflow.run
    async def run(self, inp: GcInput) -> GcResult:
        return await workflow.execute_activity_method(
            GcActivities.collect_garbage,
            inp,
            start_to_close_timeout=GC_TIMEOUT,
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=GC_RETRY,
        )
