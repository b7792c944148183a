"""The cloud worker: the agent workflow plus every cloud-side activity."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Interceptor, Plugin, Worker, WorkerDeploymentConfig

from durable_agents.activities.agent_catalog import build_catalog, default_runtime
from durable_agents.activities.agents import Agent, ModelChoice
from durable_agents.activities.answer_checks import AnswerCheckActivities
from durable_agents.activities.compaction import CompactionActivities
from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context_windows import ContextWindows, WindowSource
from durable_agents.activities.delegation import DelegationActivities
from durable_agents.activities.device_presence import DevicePresenceActivities
from durable_agents.activities.device_relay import DeviceDispatchActivities
from durable_agents.activities.gatekeeper import Gatekeeper
from durable_agents.activities.gc import GcActivities
from durable_agents.activities.model_call import ModelActivities
from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.session_open import SessionOpenActivities
from durable_agents.activities.session_state import SessionStateActivities
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import Tool, ToolRegistry
from durable_agents.activities.trajectory import TrajectoryRecorder
from durable_agents.storage.artifact_cache import ArtifactReadCache
from durable_agents.workers.process.plugin import CLOUD_WORKFLOWS as CLOUD_WORKFLOWS
from durable_agents.workers.process.plugin import AgentPlugin
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import AgentSettings, SandboxMode, Settings, workspace_layout
from durable_agents.workflows.contracts import TaskBudget

_BEHAVIORS = {
    "auto_upgrade": VersioningBehavior.AUTO_UPGRADE,
    "pinned": VersioningBehavior.PINNED,
}

# Awaited after a worker stops: exiting the process at once can abort inside the SDK's
# native runtime at interpreter shutdown (seen with temporalio 1.30-1.35).
SHUTDOWN_GRACE_SECONDS = 0.5


def cloud_activities(
    settings: Settings,
    resources: Resources,
    provider: ModelProvider,
    registry: ToolRegistry,
    *,
    recorder: TrajectoryRecorder | None = None,
    agents: Sequence[Agent] = (),
    provider_for: Callable[[ModelChoice], ModelProvider] | None = None,
    toolset_tools: Mapping[str, Sequence[Tool]] = {},
) -> list[Any]:
    """Every cloud activity; `recorder` traces model and tool calls (default: no-op).

    `provider` and `registry` serve the default agent (AGENT_SYSTEM_PROMPT); `agents` are
    the others this worker serves, `provider_for` builds the provider an agent's model
    choice names (default: `provider` for all), `toolset_tools` the tools each MCP toolset
    listed, by toolset name."""
    m = settings.model
    # Shared: run_tool leaves each result there for the model step that expands it next.
    read_cache = ArtifactReadCache(settings.agent.read_cache_mb * 1024 * 1024)
    # Asked of the server once, at the first model call, not at startup: a worker must
    # start while its model server is still down.
    source = provider if isinstance(provider, WindowSource) and m.discover_window else None
    windows = ContextWindows(source)
    budget = ContextBudget(
        m.context_tokens, m.reply_tokens, m.tool_result_tokens, m.encoding, m.compact_at_ratio
    )
    # The agents that declare a check: check_answer runs them, call_model says when an
    # answer has none to pass.
    agent_checks = {a.name: a.check for a in agents if a.check is not None}
    catalog = build_catalog(
        default_runtime(
            provider,
            registry,
            model=m.name,
            system_prompt=settings.agent.system_prompt,
            budget=budget,
        ),
        agents,
        provider_for=provider_for or (lambda _: provider),
        model=m.name,
        budget=budget,
        toolset_tools=toolset_tools,
    )
    gate = Gatekeeper(
        resources.sessions,
        settings.agent.tenant_quotas,
        max_sub_agents=settings.agent.max_sub_agents,
    )
    model = ModelActivities(
        resources.sessions,
        resources.store,
        provider,
        registry,
        model=m.name,
        system_prompt=settings.agent.system_prompt,
        budget=budget,
        agents=catalog,
        recorder=recorder,
        read_cache=read_cache,
        max_tool_argument_bytes=settings.agent.max_tool_argument_bytes,
        windows=windows,
        deltas=resources.deltas if m.stream else None,
        prices=m.price_table(),
        gate=gate,
        max_calls_per_reply=settings.agent.max_calls_per_reply,
        workspace=workspace_layout(settings.agent),
        agent_checks=agent_checks,
    )
    tools = ToolActivities(
        resources.sessions,
        resources.store,
        registry,
        workspace=workspace_layout(settings.agent),
        fetch=settings.agent.fetch_policy(),
        recorder=recorder,
        read_cache=read_cache,
        max_tool_argument_bytes=settings.agent.max_tool_argument_bytes,
        agents=catalog.registries(),
        gate=gate,
    )
    state = SessionStateActivities(resources.sessions)
    compaction = CompactionActivities(
        resources.sessions,
        provider,
        model.current_config,
        windows=windows,
        agents=catalog,
        prices=m.price_table(),
    )
    gc = GcActivities(resources.sessions, resources.store, workspace_layout(settings.agent))
    delegation = DelegationActivities(resources.sessions, resources.store, gate)
    presence = DevicePresenceActivities(resources.sessions)
    dispatch = DeviceDispatchActivities(
        resources.sessions, store_prefix=resources.store.prefix, gate=gate
    )
    opener = SessionOpenActivities(
        resources.sessions,
        resources.store,
        inline_message_bytes=settings.agent.text_limits().inline_message_bytes,
        quotas=settings.agent.tenant_quotas,
        limits={a.name: a.limits for a in agents},
        budgets={t: TaskBudget(**b.model_dump()) for t, b in settings.agent.tenant_budgets.items()},
    )
    checks = AnswerCheckActivities(
        resources.sessions,
        workspace_layout(settings.agent),
        agent_checks,
        tool_user=settings.agent.tool_user,
    )
    return [
        checks.check_answer,
        opener.open_session,
        opener.task_defaults,
        presence.device_route,
        dispatch.offer_device_call,
        gc.collect_garbage,
        delegation.open_child_session,
        delegation.record_delegation,
        model.call_model,
        compaction.compact_session,
        tools.run_tool,
        state.record_approval,
        state.record_budget_raise,
        state.record_tool_error,
        state.record_nudge,
        state.set_session_status,
    ]


def deployment_config(agent: AgentSettings) -> WorkerDeploymentConfig | None:
    """Worker Deployment Versioning as AGENT_DEPLOYMENT_NAME/AGENT_BUILD_ID/
    AGENT_VERSIONING_BEHAVIOR ask for it (docs/DEPLOY.md); None when they are unset."""
    if agent.deployment_name is None or agent.build_id is None:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(agent.deployment_name, agent.build_id),
        use_worker_versioning=True,
        default_versioning_behavior=_BEHAVIORS[agent.versioning_behavior],
    )


@dataclass(frozen=True)
class WorkerSlots:
    """How much work a worker process takes from the task queue at once. Fewer slots than
    the SDK's 100 leave a flood's backlog on the server, where it is handed out fairly
    across tenants (workers/client/fairness.py) instead of queueing inside the worker
    behind another tenant's tasks; eager activities (the server handing a workflow task's
    new activities straight back to the worker that scheduled them) skip that queue."""

    activities: int
    workflow_tasks: int
    eager_activities: bool


def worker_slots(agent: AgentSettings) -> WorkerSlots:
    return WorkerSlots(agent.activity_slots, agent.workflow_task_slots, agent.eager_activities)


def build_cloud_worker(
    client: Client,
    activities: Sequence[Any],
    *,
    task_queue: str,
    max_cached_workflows: int | None = None,
    sandbox: SandboxMode = "off",
    interceptors: Sequence[Interceptor] = (),
    plugins: Sequence[Plugin] = (),
    deployment: WorkerDeploymentConfig | None = None,
    heartbeat_throttle_seconds: float | None = None,
    slots: WorkerSlots | None = None,
) -> Worker:
    """`interceptors` and `plugins`, e.g. TrajectoryRecorder.interceptors() and .plugins(),
    must not repeat ones the client already carries: a worker runs its client's too.

    `sandbox`: the workflow sandbox (workers/process/sandbox.py): none by default; the
    tests' workers run "strict", re-importing and checking our workflow modules per run.
    `deployment`: deployment_config(settings.agent), or None for an unversioned worker.
    `heartbeat_throttle_seconds` (AgentSettings.heartbeat_throttle_seconds): at most one
    heartbeat per activity reaches the server per interval, and a cancel reaches a running
    activity only in a heartbeat's answer; None: the SDK's 0.8 x the heartbeat timeout.
    `slots`: how many activities and workflow tasks the worker takes at once
    (worker_slots(settings.agent)); None: the SDK's defaults (100 each, eager activities)."""
    extra: dict[str, Any] = {}
    if heartbeat_throttle_seconds is not None:
        throttle = timedelta(seconds=heartbeat_throttle_seconds)
        extra["max_heartbeat_throttle_interval"] = throttle
        extra["default_heartbeat_throttle_interval"] = throttle
    if max_cached_workflows is not None:
        extra["max_cached_workflows"] = max_cached_workflows
    if deployment is not None:
        extra["deployment_config"] = deployment
    if slots is not None:
        extra["max_concurrent_activities"] = slots.activities
        extra["max_concurrent_workflow_tasks"] = slots.workflow_tasks
        extra["disable_eager_activity_execution"] = not slots.eager_activities
    ours = AgentPlugin(activities, sandbox=sandbox, interceptors=interceptors)
    return Worker(client, task_queue=task_queue, plugins=[ours, *plugins], **extra)


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    """Run a worker in the background for the length of a block."""
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(SHUTDOWN_GRACE_SECONDS)
