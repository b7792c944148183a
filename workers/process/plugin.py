"""One Temporal plugin for every worker of ours (the SDK's SimplePlugin): the workflows it
serves, its activities, our failure words first among its interceptors, then tracing's, and
the workflow sandbox mode. A cloud worker, a device worker, a gateway's device relay, the
tests' and the benches' workers are all built with it, so none of them is assembled by hand.

The payload converter (with offload to the artifact store) is the client's: a Temporal worker
always encodes with its client's converter, so it is set where the client connects
(workers/temporal_client.py, workers/process/payload_offload.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from temporalio.plugin import SimplePlugin
from temporalio.worker import Interceptor

from durable_agents.activities.failure_words import FailureWords
from durable_agents.workers.process.sandbox import runner_for
from durable_agents.workers.settings import SandboxMode
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.gc import ArtifactGcWorkflow

# The workflows a cloud worker serves: what `agentctl deploy check` replays histories
# against, so a deploy is checked with exactly the code the workers will run.
CLOUD_WORKFLOWS: tuple[type, ...] = (AgentWorkflow, ArtifactGcWorkflow)


class AgentPlugin(SimplePlugin):
    """`activities` to register; `workflows` (the cloud's by default, none for a worker that
    runs device tools); `sandbox` as workers/process/sandbox.py describes; `interceptors` go
    after FailureWords, which must see what every other one lets through."""

    def __init__(
        self,
        activities: Sequence[Callable[..., Any]] = (),
        *,
        workflows: Sequence[type] = CLOUD_WORKFLOWS,
        sandbox: SandboxMode = "off",
        interceptors: Sequence[Interceptor] = (),
    ) -> None:
        super().__init__(
            "durable_agents.AgentPlugin",
            activities=list(activities),
            workflows=list(workflows),
            interceptors=[FailureWords(), *interceptors],
            workflow_runner=runner_for(sandbox) if workflows else None,
        )
