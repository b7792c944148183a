"""Forking a task: a new task, in the same tenant, that shares another's committed items up
to a step and makes that step's model call itself, optionally with another agent or an
instruction of its own.

The fork is a session of its own (storage/forks.py: its row names the parent and the fork
point; nothing of the parent is copied or written) run by a new AgentWorkflow that starts
at the fork's step. Its idempotency keys are `{workflow id}:{step}:…` with the fork's own
workflow id, so the fork re-decides every call from its step on: nothing the parent
committed after the fork point is returned to it, and no effect of the parent is replayed
or skipped. It passes the start's door: the caller's scope, the start options' rules and
the tenant's kill switch and quotas in the commit's own transaction; a refused fork writes
nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from durable_agents.activities.agents import check_agent_name
from durable_agents.activities.policies.task_rules import InvalidTaskInput, check_range
from durable_agents.activities.policies.text_limits import check_size, check_text, utf8_size
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.fork_edits import carried_items, result_edits
from durable_agents.storage.forks import create_fork, fork_point
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import SessionRow
from durable_agents.storage.quotas import tenant_default
from durable_agents.storage.user_messages import StagedText, stage_user_text
from durable_agents.workers.client.commands import Caller, task_options
from durable_agents.workers.client.fairness import tenant_priority
from durable_agents.workers.client.tasks import check_device, session_uuid
from durable_agents.workers.settings import Settings
from durable_agents.workers.task_options import MAX_STEPS, TaskOptions
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.policies import workflow_id_for

# The width of items.tool_call_id: no call has a longer id.
MAX_CALL_ID_CHARS = 128


@dataclass
class ForkRequest:
    """Fork `session_id` at step `step`: the fork shares what the parent committed before
    that step's model call and makes the call itself. `agent`: another agent definition
    (None: the parent's); `instruction`: a user message the fork's model reads after the
    fork point; `options`: start options (TaskOptions fields), by the same scope map;
    `results`: edited results of the calls step `step` reads (storage/fork_edits.py)."""

    session_id: str
    step: int
    agent: str | None = None
    instruction: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # Tool call id of step `step - 1` -> the text the fork's model reads as its result.
    results: dict[str, str] = field(default_factory=dict)


async def fork_task(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore | None,
    settings: Settings,
    caller: Caller,
    request: ForkRequest,
) -> str:
    """Commit the fork and start its workflow; the fork's session id. SessionNotFound for
    another tenant's session, NotForkable, InvalidTaskInput, ScopeRefused, TenantFrozen or
    QuotaRefused before anything commits."""
    check_range("step", request.step, 0, MAX_STEPS - 1, open_low=False)
    if request.agent is not None:
        check_agent_name(request.agent)
    limits = settings.agent.text_limits()
    if request.instruction is not None:
        check_text("instruction", request.instruction)
        size = utf8_size(request.instruction)
        check_size("the instruction", size, limits.max_message_bytes, "AGENT_MAX_MESSAGE_BYTES")
        if not request.instruction.strip():
            raise ValueError("instruction: the instruction is empty")
    _check_results(request.results, limits.max_message_bytes)
    parent_id = session_uuid(request.session_id)
    async with agent_state(sessions, caller.tenant_id) as st:
        parent = await st.sessions.get(parent_id)  # another tenant's: not found
        if request.results:  # before any upload: a refused call id leaves no object
            await result_edits(st, await fork_point(st, parent_id, request.step), request.results)
    options = fork_options(caller, parent, request.agent, request.options, settings)
    options = _step_limit(options, request)
    staged: StagedText | None = None
    if request.instruction is not None:
        staged = await stage_user_text(
            store, caller.tenant_id, request.instruction, limits.inline_message_bytes
        )
    texts = {
        call: await stage_user_text(store, caller.tenant_id, text, limits.inline_message_bytes)
        for call, text in request.results.items()
    }
    return await commit_fork(
        client,
        sessions,
        store,
        settings,
        caller,
        options,
        parent_id,
        request.step,
        staged,
        results=texts,
    )


def fork_options(
    caller: Caller,
    parent: SessionRow,
    agent: str | None,
    requested: dict[str, Any],
    settings: Settings,
) -> TaskOptions:
    """A fork's start options: the parent's project, the approval policies that add
    approvals and its check, then what the caller `requested` (by the start's rules); the
    parent's agent unless `agent` names another. A loosening is not inherited."""
    approvals = parent.approvals or {}
    inherited: dict[str, Any] = {
        "project": parent.project,
        "approval_policies": dict(approvals.get("policies") or {}),
        "check": parent.task_check,
    }
    agent = agent or parent.agent_definition
    return task_options(caller, agent, requested, settings, inherited=_set(inherited))


async def commit_fork(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore | None,
    settings: Settings,
    caller: Caller,
    options: TaskOptions,
    parent_id: uuid.UUID,
    step: int,
    instruction: StagedText | None = None,
    *,
    results: Mapping[str, StagedText] | None = None,
    replay: dict[str, object] | None = None,
) -> str:
    """Commit a fork of `parent_id` at `step` (with edited `results` of the calls that step
    reads, and its `replay` mark, for a replay) in one transaction with the start's checks,
    then start its workflow at `step`; its id."""
    fork_id = uuid.uuid4()
    workflow_id = workflow_id_for(str(fork_id))
    quotas = tenant_default(settings.agent.tenant_quotas, caller.tenant_id)
    async with agent_state(sessions, caller.tenant_id, write=True) as st:
        # Inside the transaction: a refusal rolls back, so nothing is committed.
        point = await fork_point(st, parent_id, step)
        edits = await result_edits(st, point, results) if results else None
        await check_device(st, options)
        await st.controls.check_start(quotas)
        carried: list[NewItem] = []
        if edits is not None:
            carried = await carried_items(
                st, edits, results or {}, fork_id=fork_id, workflow_id=workflow_id, store=store
            )
            point = edits.point
        await create_fork(
            st,
            point,
            fork_id,
            workflow_id=workflow_id,
            agent_definition=options.agent,
            model_config=options.model_config,
            approvals=options.approvals_record(),
            instruction=instruction,
            store=store,
            carried=carried,
            replay=replay,
        )
    first = replace(options.agent_input(str(fork_id)), step=step)
    await client.start_workflow(
        AgentWorkflow.run,
        first,
        id=workflow_id,
        task_queue=options.task_queue,
        priority=tenant_priority(options.tenant_id),
    )
    return str(fork_id)


def _check_results(results: Any, max_bytes: int) -> None:
    """Edited results as the command layer takes every user's text: a map of call ids
    (as items hold them) to non-empty storable text within the message limit."""
    if not isinstance(results, dict):
        raise InvalidTaskInput(
            "results", f"results must be a map of call id to text, got {type(results).__name__}"
        )
    for call, text in results.items():
        check_text("results (a call id)", call)
        if not 0 < len(call) <= MAX_CALL_ID_CHARS:
            raise InvalidTaskInput(
                "results", f"results: a call id has 1 to {MAX_CALL_ID_CHARS} characters"
            )
        what = f"the edited result of {call}"
        check_text(f"results: {what}", text)
        check_size(what, utf8_size(text), max_bytes, "AGENT_MAX_MESSAGE_BYTES")
        if not text.strip():
            raise ValueError(f"results: {what} is empty")


def _set(options: dict[str, Any]) -> dict[str, Any]:
    """The options that say something (an empty policy map or no check is the default)."""
    return {k: v for k, v in options.items() if v}


def _step_limit(options: TaskOptions, request: ForkRequest) -> TaskOptions:
    """A fork's steps continue its parent's numbering: a limit the caller set must leave it a
    step; by default the fork has its agent's allowance from the fork point on."""
    if "max_steps" in request.options:
        if options.max_steps <= request.step:
            raise InvalidTaskInput(
                "max_steps",
                f"max_steps must be above the fork step {request.step} (steps are numbered "
                f"from the task's start), got {options.max_steps}",
            )
        return options
    return replace(options, max_steps=min(MAX_STEPS, request.step + options.max_steps))
