"""The verbs as tests call them: each through the one service (workers/client/service.py),
as the operator of `tenant_id` recorded as `by`, so every test that approves, rejects,
cancels, sends, resumes or raises exercises the same door as agentctl and the gateway."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client, WorkflowHandle

from durable_agents.activities.policies.text_limits import TextLimits
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.models import ItemRow
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.settings import Settings, get_settings
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import CancelResult, DecisionResult, RaiseBudgetResult


def service(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    store: ArtifactStore | None = None,
    limits: TextLimits | None = None,
) -> TaskService:
    settings: Settings = get_settings()
    if limits is not None:  # TextLimits' fields are the settings' names
        agent = settings.agent.model_copy(update=dataclasses.asdict(limits))
        settings = settings.model_copy(update={"agent": agent})
    return TaskService(client, sessions, store, settings)


def operator(tenant_id: str, by: str = "operator") -> Caller:
    return Caller.operator(tenant_id, user_id=by)


async def approve(
    client: Client,
    session_id: str,
    call_id: str,
    by: str,
    *,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    device_id: str | None = None,
    edited_arguments: dict[str, Any] | None = None,
    limits: TextLimits | None = None,
) -> DecisionResult:
    return await service(client, sessions, limits=limits).approve(
        operator(tenant_id, by),
        session_id,
        call_id,
        arguments=edited_arguments,
        device_id=device_id,
    )


async def reject(
    client: Client,
    session_id: str,
    call_id: str,
    reason: str,
    by: str,
    *,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    device_id: str | None = None,
) -> DecisionResult:
    return await service(client, sessions).reject(
        operator(tenant_id, by), session_id, call_id, reason, device_id=device_id
    )


async def cancel(
    client: Client, sessions: async_sessionmaker[AsyncSession], tenant_id: str, session_id: str
) -> CancelResult:
    return await service(client, sessions).cancel(operator(tenant_id), session_id)


async def send_message(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    text: str,
    *,
    message_id: str | None = None,
    store: ArtifactStore | None = None,
    limits: TextLimits | None = None,
) -> ItemRow:
    return await service(client, sessions, store, limits).send(
        operator(tenant_id), session_id, text, message_id=message_id
    )


async def resume(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    *,
    max_steps: int | None = None,
) -> WorkflowHandle[AgentWorkflow, Any]:
    sid = await service(client, sessions).resume(
        operator(tenant_id), session_id, max_steps=max_steps
    )
    return tasks.task_handle(client, sid)


async def raise_budget(
    client: Client,
    session_id: str,
    by: str,
    *,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    **figures: Any,
) -> RaiseBudgetResult:
    return await service(client, sessions).raise_budget(
        operator(tenant_id, by), session_id, figures
    )
