"""The public Python API, in one place: define agents and tools, serve them, start a task,
approve its calls and await its answer.

    from durable_agents import Agent, connect, serve, tool

    @tool(effect="read_only")
    async def add(ctx: ToolContext, a: int, b: int) -> str:
        "Add two integers."
        return str(a + b)

    agent = Agent(name="adder", instructions="Add numbers with the add tool.", tools=[add])
    async with serve([agent]), connect() as client:
        task = await client.start(agent, "add a=2 b=3")
        print((await task.result()).answer)

Connections come from the environment like every other entry point (DATABASE_URL, S3_*,
TEMPORAL_ADDRESS, MODEL_*; `agentctl dev up` serves all three on this machine). Nothing
here is a second implementation: each call goes through the one service
(workers/client/service.py), as agentctl's and the gateway's do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowFailureError

from durable_agents.activities.agents import DEFAULT_AGENT, Agent, Limits, ModelChoice
from durable_agents.activities.tools.base import Tool, ToolContext, ToolError, ToolOutput
from durable_agents.activities.tools.builtin import FILE_TOOLS, builtin_tools
from durable_agents.activities.tools.mcp_servers import McpHttp, McpStdio
from durable_agents.activities.tools.typed import tool
from durable_agents.storage.agent_state import agent_state
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES, SessionStatus
from durable_agents.workers.client import tasks
from durable_agents.workers.client.cassettes import assert_replays, export_cassette
from durable_agents.workers.client.commands import Caller, StartRequest
from durable_agents.workers.client.comparison import Comparison
from durable_agents.workers.client.fairness import tenant_priority
from durable_agents.workers.client.forks import ForkRequest
from durable_agents.workers.client.replays import ReplayReport, ReplayRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.process.run import run_cloud_worker
from durable_agents.workers.resources import Resources, open_resources
from durable_agents.workers.settings import Settings, get_settings
from durable_agents.workers.task_options import TaskOptions
from durable_agents.workers.temporal_client import connect_client
from durable_agents.workflows.contracts import AgentStatus, PendingApproval, RaiseBudgetResult

__all__ = [
    "DEFAULT_AGENT",
    "FILE_TOOLS",
    "Agent",
    "AgentClient",
    "AgentStatus",
    "Limits",
    "McpHttp",
    "McpStdio",
    "ModelChoice",
    "PendingApproval",
    "Task",
    "TaskOptions",
    "TaskResult",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "assert_replays",
    "builtin_tools",
    "connect",
    "export_cassette",
    "serve",
    "tenant_priority",
    "tool",
]

# How often Task.wait_for_approval and Task.result look at a task that has not ended.
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class TaskResult:
    """How a task ended. `answer`: the text of its last model reply (from AgentState; it
    never travels through workflow history)."""

    session_id: str
    status: str
    steps: int
    answer: str | None
    error: str | None = None
    # Completed: whether the task's own check passed on the answer. False: it declares
    # none, so `answer` is the model's claim, unchecked.
    checked: bool = False


class Task:
    """One task, by session id: what a client can do to it."""

    def __init__(self, client: AgentClient, session_id: str) -> None:
        self._client = client
        self.session_id = session_id

    async def status(self) -> AgentStatus:
        return await self._client.service.live_status(self._client.caller, self.session_id)

    async def wait_for_approval(self, wait_seconds: float = 60.0) -> PendingApproval:
        """The first call waiting for a decision, once there is one. TimeoutError after
        `wait_seconds`; tasks.TaskNotRunning if the task ended without asking."""
        async with asyncio.timeout(wait_seconds):
            while True:
                status = await self.status()
                if status.pending_approvals:
                    return status.pending_approvals[0]
                if status.status in TERMINAL_STATUSES:
                    raise tasks.TaskNotRunning(
                        f"task {self.session_id} ended ({status.status}) without asking"
                    )
                await asyncio.sleep(POLL_SECONDS)

    async def approve(
        self, call_id: str, *, by: str = "api", arguments: dict[str, Any] | None = None
    ) -> None:
        """Approve a waiting call; `arguments`: run it with these instead (checked against
        the tool's schema, as at every door)."""
        caller = self._client.caller_as(by)
        await self._client.service.approve(caller, self.session_id, call_id, arguments=arguments)

    async def reject(self, call_id: str, reason: str, *, by: str = "api") -> None:
        caller = self._client.caller_as(by)
        await self._client.service.reject(caller, self.session_id, call_id, reason)

    async def raise_budget(
        self,
        *,
        by: str = "api",
        tokens: int | None = None,
        cost_usd: float | None = None,
        tool_calls: int | None = None,
        seconds: float | None = None,
    ) -> RaiseBudgetResult:
        """New budget figures (unnamed ones stay); a task parked at its budget goes on."""
        given = {"tokens": tokens, "cost_usd": cost_usd, "tool_calls": tool_calls}
        figures = {k: v for k, v in {**given, "seconds": seconds}.items() if v is not None}
        caller = self._client.caller_as(by)
        return await self._client.service.raise_budget(caller, self.session_id, figures)

    async def send(self, text: str) -> None:
        """A follow-up message; the task answers it before it ends."""
        await self._client.service.send(self._client.caller, self.session_id, text)

    async def cancel(self) -> None:
        await self._client.service.cancel(self._client.caller, self.session_id)

    async def fork(
        self,
        at: int,
        *,
        agent: str | None = None,
        instruction: str | None = None,
        results: dict[str, str] | None = None,
        **options: Any,
    ) -> Task:
        """A new task sharing what this one committed before step `at`'s model call, which
        it makes itself: with another agent definition, an instruction of its own, edited
        `results` (call id of step `at - 1` -> the text its model reads as that call's
        result) and start options (TaskOptions fields, as `start` takes). This task is not
        changed."""
        edited = {} if results is None else results
        request = ForkRequest(self.session_id, at, agent, instruction, options, edited)
        return Task(self._client, await self._client.service.fork(self._client.caller, request))

    async def replay(
        self, *, agent: str | None = None, live: Sequence[str] = (), **options: Any
    ) -> Task:
        """A replay of this (ended) task from its record: with another agent definition,
        tools `live` run live, and start options as `fork` takes. Its `replay_report()`
        says where it first parts from this task. This task is not changed."""
        request = ReplayRequest(self.session_id, agent, list(live), options)
        return Task(self._client, await self._client.service.replay(self._client.caller, request))

    async def replay_report(self) -> ReplayReport:
        """This replay's first divergence from its record (None: none, so far) and what it
        served from the record."""
        return await self._client.service.replay_report(self._client.caller, self.session_id)

    async def compare(self, *others: Task | str) -> Comparison:
        """This task and `others` (tasks, or session ids) side by side, step by step, and
        where each of them first parts from this one."""
        ids = [self.session_id, *(o.session_id if isinstance(o, Task) else o for o in others)]
        return await self._client.service.compare(self._client.caller, ids)

    async def result(self) -> TaskResult:
        """Wait for the task to end; its status, steps and final answer."""
        handle = tasks.task_handle(self._client.temporal, self.session_id)
        try:
            done = await handle.result()
            steps, error = done.steps, done.last_error
        except WorkflowFailureError:
            steps, error = -1, None  # AgentState says what happened
        sid = tasks.session_uuid(self.session_id)
        async with agent_state(self._client.resources.sessions, self._client.tenant_id) as st:
            session = await st.sessions.get(sid)
            reply = await st.items.first_of_kind(sid, ItemKind.ASSISTANT_MESSAGE, last=True)
            failure = await st.items.first_of_kind(sid, ItemKind.ERROR, last=True)
        completed = session.status == SessionStatus.COMPLETED
        if error is None and failure is not None and not completed:
            error = failure.text
        if steps < 0 and reply is not None:
            steps = int(reply.data.get("step", 0)) + 1
        answer = reply.text if reply is not None and completed else None
        checked = completed and bool(session.checked)
        return TaskResult(self.session_id, session.status, max(steps, 0), answer, error, checked)


class AgentClient:
    """A connection to the deployment as one tenant, holding the deployment's credentials
    (the operator): every call goes through the one service, as agentctl's do."""

    def __init__(
        self,
        temporal: Client,
        resources: Resources,
        tenant_id: str,
        settings: Settings | None = None,
    ) -> None:
        self.temporal = temporal
        self.resources = resources
        self.tenant_id = tenant_id
        settings = settings or get_settings()
        self.service = TaskService(temporal, resources.sessions, resources.store, settings)
        self.caller = self.caller_as(None)

    def caller_as(self, by: str | None) -> Caller:
        """This client as the operator of its tenant, recorded as `by` (default api:TENANT)."""
        return Caller.operator(self.tenant_id, user_id=by or f"api:{self.tenant_id}")

    async def start(self, agent: Agent | str, text: str, **options: Any) -> Task:
        """Start a task of `agent` (an Agent, or the name of one the workers serve).
        `options`: TaskOptions fields (max_steps, approval_policies, device_id, ...), checked
        by the command layer as at every other door; the tenant is this client's."""
        sid = await self.service.start(self.caller, StartRequest(text, agent, options))
        return Task(self, sid)

    def task(self, session_id: str) -> Task:
        """A task started earlier (from any device)."""
        return Task(self, str(tasks.session_uuid(session_id)))


@asynccontextmanager
async def connect(
    *, tenant_id: str | None = None, settings: Settings | None = None
) -> AsyncIterator[AgentClient]:
    """A client for the block, as `tenant_id` (default AGENT_TENANT_ID), with `settings`
    (default: from the environment) for its connections and every task it starts."""
    settings = settings or get_settings()
    async with open_resources(settings.database, settings.s3) as res:
        temporal = await connect_client(data_converter=data_converter_with_offload(res.store))
        yield AgentClient(temporal, res, tenant_id or settings.agent.tenant_id, settings)


@asynccontextmanager
async def serve(
    agents: Sequence[Agent] = (), *, settings: Settings | None = None
) -> AsyncIterator[None]:
    """Run a cloud worker for `agents` (and the default agent) in this process for the
    block; in production, `agentctl worker --agents module:ATTR` runs the same worker."""
    stop, ready = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(
        run_cloud_worker(settings or get_settings(), stop, agents, ready=ready)
    )
    started = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, started}, return_when=asyncio.FIRST_COMPLETED)
    if worker.done():  # it could not start (a bad definition, a service down): say why
        started.cancel()
        worker.result()
        raise RuntimeError("the worker stopped before it started")
    try:
        yield
    finally:
        stop.set()
        await worker
