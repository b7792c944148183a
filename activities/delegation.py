"""Activities behind the `delegate` tool: open a child session, and report what it made."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.errors import non_retryable, storage_errors_are_final
from durable_agents.activities.gatekeeper import Gatekeeper
from durable_agents.activities.policies.admission import Admission, Refusal, admit
from durable_agents.activities.tools.builtin import DELEGATE_SPEC
from durable_agents.storage.admissions import SUB_AGENT
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.items import NewItem
from durable_agents.storage.tool_results import ToolResult, VerifiedArtifact, commit_tool_result
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workflows.contracts import (
    ChildSession,
    ChildSessionInput,
    CommittedItem,
    DelegationResultInput,
)
from durable_agents.workflows.policies import workflow_id_for

MAX_TASK_CHARS = 8_000


def _child_id(idempotency_key: str) -> uuid.UUID:
    # Derived from the call's key: a retried or replayed delegation opens the same child.
    return uuid.uuid5(uuid.NAMESPACE_URL, f"durable-agents:child:{idempotency_key}")


def _task_of(arguments: dict[str, Any]) -> tuple[str, str]:
    task, agent = arguments.get("task"), arguments.get("agent", "sub-agent")
    if not isinstance(task, str) or not task.strip() or len(task) > MAX_TASK_CHARS:
        raise non_retryable(
            "InvalidArguments", f"delegate needs a 'task' string of 1-{MAX_TASK_CHARS} characters"
        )
    if not isinstance(agent, str) or not agent.strip() or len(agent) > 64:
        raise non_retryable("InvalidArguments", "delegate's 'agent' must be a short name")
    if not arguments.keys() <= DELEGATE_SPEC.parameters["properties"].keys():
        # Fixed words: this message travels through workflow history, where the names the
        # model made up must not (the model still hears which arguments are allowed).
        raise non_retryable("InvalidArguments", "delegate takes only 'task' and 'agent'")
    return task, agent.strip()


class DelegationActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        gate: Gatekeeper | None = None,
    ) -> None:
        """`gate`: what admits each sub-agent (default: the kill switch and budgets, no
        quotas, no cap on sub-agents)."""
        self._sessions = sessions
        self._store = store
        self._gate = gate or Gatekeeper(sessions)

    @activity.defn(name="open_child_session")
    async def open_child_session(self, inp: ChildSessionInput) -> ChildSession:
        """Once the gate admits it, create the child session (parent edge, agent name)
        with the task as its message, in the admission's transaction. Refused, the call
        gets the refusal as its result instead."""
        parent = uuid.UUID(inp.parent_session_id)
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            items = st.items
            call = await items.tool_call(parent, inp.tool_call_id)
            if call is None:
                raise non_retryable("ToolCallNotFound", f"no tool call {inp.tool_call_id}")
            task, agent = _task_of(dict(call.data.get("arguments", {})))
            root = uuid.UUID(inp.budget_session_id) if inp.budget_session_id else None
            request = Admission(
                SUB_AGENT, inp.idempotency_key, await st.sessions.get(parent), inp.budget, root
            )
            gate = await admit(st, request, self._gate.limits(inp.tenant_id))
            if gate.closed is not None:
                return ChildSession("", "", closed=gate.closed)
            if gate.refused is not None:
                await _refuse(st, inp, gate.refused)
                return ChildSession("", "", refused=True)
            child = _child_id(inp.idempotency_key)
            await st.sessions.create(
                child,
                title=task[:200],
                model_config={},
                workflow_id=workflow_id_for(str(child)),
                parent_id=parent,
                agent_name=agent,
            )
            await items.append(
                NewItem(
                    child,
                    ItemKind.USER_MESSAGE,
                    "user",
                    f"{inp.idempotency_key}:task",
                    text=task,
                    tokens=count_tokens(task),
                )
            )
            return ChildSession(str(child), agent)

    @activity.defn(name="record_delegation")
    async def record_delegation(self, inp: DelegationResultInput) -> CommittedItem:
        """Commit the child's summary and artifact refs as the parent's tool result."""
        parent, child = uuid.UUID(inp.parent_session_id), uuid.UUID(inp.child_session_id)
        async with storage_errors_are_final():
            async with agent_state(self._sessions, inp.tenant_id) as st:
                done = await st.items.by_key(inp.idempotency_key)
                if done is not None:
                    return CommittedItem(str(done.id), done.ordinal)
                child_row = await st.sessions.get(child)
                rows = await st.items.page(child)
                made = await st.artifacts.get_many(r.artifact_id for r in rows if r.artifact_id)
            final = next(
                (r.text for r in reversed(rows) if r.kind == ItemKind.ASSISTANT_MESSAGE), ""
            )
            report = {
                "agent": child_row.agent_name,
                "child_session_id": inp.child_session_id,
                "status": inp.child_status,
                "summary": final,
                "error": inp.error,
                "artifacts": [
                    {
                        "artifact_id": str(a.artifact_id),
                        "sha256": a.sha256,
                        "size_bytes": a.size_bytes,
                        "content_type": a.content_type,
                    }
                    for a in made.values()
                ],
            }
            content = json.dumps(report, indent=1).encode()
            ref = await self._store.put(inp.tenant_id, content, "application/json")
            async with agent_state(self._sessions, inp.tenant_id, write=True) as st:
                # The parent now needs the child's artifacts too, for as long as it lives.
                for owned in made:
                    await st.artifacts.add_ref(
                        owned,
                        owner_type="checkpoint",
                        owner_id=inp.parent_session_id,
                        required_for_resume=True,
                    )
                row = await commit_tool_result(
                    st.db,
                    st.tenant_id,
                    ToolResult(
                        session_id=parent,
                        tool_call_id=inp.tool_call_id,
                        tool_name=DELEGATE_SPEC.name,
                        step=inp.step,
                        idempotency_key=inp.idempotency_key,
                        artifact=VerifiedArtifact(ref, content),
                        error_type="DelegationFailed" if inp.error else None,
                        extra={"child_session_id": inp.child_session_id},
                    ),
                    store=self._store,
                )
                return CommittedItem(str(row.id), row.ordinal)


async def _refuse(st: AgentState, inp: ChildSessionInput, refusal: Refusal) -> None:
    """The delegate call's result: the refusal, in the gate's words."""
    await commit_tool_result(
        st.db,
        st.tenant_id,
        ToolResult(
            session_id=uuid.UUID(inp.parent_session_id),
            tool_call_id=inp.tool_call_id,
            tool_name=DELEGATE_SPEC.name,
            step=inp.step,
            idempotency_key=inp.idempotency_key,
            error_type=refusal.error_type,
            error=refusal.words,
        ),
    )
