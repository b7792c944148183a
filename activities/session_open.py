"""open_session: the first activity of a task a plain Temporal client started.

The client put the task text inline in the workflow's start input (workflows/session_open.py).
This activity reads it back from that run's start event, so neither its input nor its
result repeats the text in history, then creates the session and commits the text as the
task item in one unit of work, once per idempotency key (derived from the workflow id): a
retried attempt or a replayed workflow finds what the first one committed.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.agents import DEFAULT_AGENT as DEFAULT_AGENT
from durable_agents.activities.agents import Limits, check_agent_name
from durable_agents.activities.errors import non_retryable, storage_errors_are_final
from durable_agents.activities.policies.task_rules import (
    DEFAULT_MAX_STEPS,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    check_task_settings,
    tighter,
)
from durable_agents.activities.policies.text_limits import check_text, utf8_size
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.artifacts import ArtifactStore, check_user_tenant
from durable_agents.storage.errors import InvalidTenant, SessionNotFound
from durable_agents.storage.quotas import Quotas, tenant_default
from durable_agents.storage.sessions import session_id_taken
from durable_agents.storage.user_messages import stage_user_text, user_message_item
from durable_agents.workflows.contracts import (
    AgentInput,
    OpenSessionInput,
    TaskBudget,
    TaskDefaults,
    TaskDefaultsInput,
)
from durable_agents.workflows.policies import MAX_INLINE_TASK_BYTES, workflow_id_for
from durable_agents.workflows.run_input import run_start_input
from durable_agents.workflows.task_settings import DEFAULT_STUCK_AFTER

TITLE_CHARS = 200


def check_task_text(text: str, max_bytes: int) -> str:
    """`text` if it can be a task: not blank, at most `max_bytes` of UTF-8 (ValueError)."""
    check_text("the task text", text)
    if not text.strip():
        raise ValueError("the task text is empty")
    size = utf8_size(text)
    if size > max_bytes:
        raise ValueError(
            f"the task text is {size} bytes, over the inline limit of {max_bytes} bytes; "
            "commit a longer task to AgentState first (durable_agents.workers.api / agentctl start)"
        )
    return text


class SessionOpenActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore | None,
        *,
        inline_message_bytes: int,
        quotas: Mapping[str, Quotas] | None = None,
        limits: Mapping[str, Limits] | None = None,
        budgets: Mapping[str, TaskBudget] | None = None,
    ) -> None:
        """`quotas`: the default quotas by tenant ("*": any other), as the command layer's;
        `limits`: the Limits of each agent the worker serves, by name; `budgets`: the
        default task budgets by tenant ("*": any other)."""
        self._sessions = sessions
        self._store = store
        self._inline_bytes = inline_message_bytes
        self._quotas = quotas or {}
        self._limits = limits or {}
        self._budgets = budgets or {}

    def defaults(self, agent: str, tenant_id: str) -> TaskDefaults:
        """What a start through the command layer would have set: the agent's Limits, and
        the tighter of its budget and the tenant's default, figure by figure."""
        limits = self._limits.get(agent, Limits())
        tenant = tenant_default(self._budgets, tenant_id) or TaskBudget()
        budget = TaskBudget(
            tokens=tighter(limits.budget_tokens, tenant.tokens),
            cost_usd=tighter(limits.budget_cost_usd, tenant.cost_usd),
            tool_calls=tighter(limits.budget_tool_calls, tenant.tool_calls),
            seconds=tighter(limits.budget_seconds, tenant.seconds),
        )
        return TaskDefaults(
            max_steps=limits.max_steps or DEFAULT_MAX_STEPS,
            tool_timeout_seconds=limits.tool_timeout_seconds or DEFAULT_TOOL_TIMEOUT_SECONDS,
            budget=budget,
            stuck_after=limits.stuck_after or DEFAULT_STUCK_AFTER,
        )

    @activity.defn(name="task_defaults")
    async def task_defaults(self, inp: TaskDefaultsInput) -> TaskDefaults:
        """The defaults of a run whose start left settings unset (a plain start's run
        resumed), by its session's agent."""
        async with storage_errors_are_final(), agent_state(self._sessions, inp.tenant_id) as st:
            session = await st.sessions.get(uuid.UUID(inp.session_id))
        return self.defaults(session.agent_definition, inp.tenant_id)

    @activity.defn(name="open_session")
    async def open_session(self, inp: OpenSessionInput) -> TaskDefaults:
        """Create the session (tenant and agent from the start input) and commit its task.

        Refused, non-retryable and before anything is committed: a tenant a user may not
        act as, a bad agent name, text or option, a workflow id not derived from the
        session id, and a session id that any session created before this run holds,
        another tenant's or this tenant's: no writing into it."""
        info = activity.info()
        try:
            check_user_tenant(inp.tenant_id)
            check_agent_name(inp.agent)
            session_id = uuid.UUID(inp.session_id)
        except (InvalidTenant, ValueError) as err:
            raise non_retryable("InvalidTaskInput", str(err)) from None
        if info.workflow_id != workflow_id_for(str(session_id)):
            # Never written under another id: a held id is taken, any other id refused.
            async with self._sessions() as db:
                if await session_id_taken(db, session_id):
                    raise _taken(session_id)
            raise non_retryable(
                "InvalidTaskInput", f"a task of session {session_id} runs as its own workflow only"
            )
        start = await self._start_input()
        text = start.task_text or ""
        staged = await stage_user_text(self._store, inp.tenant_id, text, self._inline_bytes)
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            if not await session_id_taken(st.db, session_id):
                # The command layer's start check, in this commit's transaction; a retry
                # that finds its own session committed is not a new start.
                await self._within_quotas(st)
            try:
                # Does nothing when the id exists; reading it back under our tenant then
                # fails for another tenant's session.
                session = await st.sessions.create(
                    session_id,
                    title=text[:TITLE_CHARS],
                    model_config={},
                    workflow_id=info.workflow_id,
                    workflow_run_id=info.workflow_run_id,
                    agent_definition=inp.agent,
                    # A plain start holds no scope that may loosen the agent's approvals.
                    approvals={
                        "policies": dict(start.settings.approval_policies),
                        "loosened": {},
                        "loosened_by": None,
                    },
                )
            except SessionNotFound:
                raise _taken(session_id) from None
            # A session this run did not create (a retry of this activity finds its own).
            # Rows created before runs were recorded compare their task below instead.
            run = session.workflow_run_id
            if run is not None and run != info.workflow_run_id:
                raise _taken(session_id)
            item = await user_message_item(
                st.db,
                self._store,
                staged,
                tenant_id=inp.tenant_id,
                session_id=session_id,
                idempotency_key=inp.idempotency_key,
            )
            row, created = await st.items.append(item)
            if not created and (row.text, row.data.get("artifact")) != (
                item.text,
                item.data.get("artifact"),
            ):
                # The leaving transaction rolls back: the session keeps what it had.
                raise non_retryable(
                    "SessionIdTaken",
                    f"session {session_id} already has another task; send a follow-up "
                    "message to it, or start the task with a new session id",
                )
            return self.defaults(inp.agent, inp.tenant_id)

    async def _within_quotas(self, st: AgentState) -> None:
        # TenantFrozen, QuotaRefused: storage errors, final in our words and numbers.
        await st.controls.check_start(tenant_default(self._quotas, st.tenant_id))

    async def _start_input(self) -> AgentInput:
        """The run's start input, checked by the command layer's rules (as the workflow
        checked it); InvalidTaskInput in fixed words otherwise."""
        info = activity.info()
        start = None
        if info.workflow_id is not None:
            start = await run_start_input(activity.client(), info.workflow_id, info.workflow_run_id)
        if start is None or start.task_text is None:
            raise non_retryable(
                "InvalidTaskInput", f"run {info.workflow_run_id} started without a task text"
            )
        try:
            check_task_text(start.task_text, MAX_INLINE_TASK_BYTES)
            check_task_settings(start.settings)
        except ValueError as err:
            raise non_retryable("InvalidTaskInput", str(err)) from None
        return start


def _taken(session_id: uuid.UUID) -> Exception:
    return non_retryable(
        "SessionIdTaken",
        f"session id {session_id} is taken; start the task with a new session id",
    )
