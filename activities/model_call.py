"""The call_model activity: assemble context from AgentState, call the provider, persist
only the reply (an assistant item plus one tool_call item per requested call)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from activities.context import AssembledContext, ContextBudget, assemble_context
from activities.errors import storage_errors_are_final
from activities.providers.base import ModelProvider, ModelReply, ModelRequest
from activities.tools.base import ToolRegistry
from storage.artifact_records import ArtifactRepository
from storage.artifacts import ArtifactStore
from storage.items import ItemRepository, NewItem
from storage.models import ItemRow
from storage.sessions import SessionRepository
from workflows.contracts import ArtifactRef, ModelCallInput, ModelCallResult, ToolCallRef


class ModelActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        provider: ModelProvider,
        registry: ToolRegistry,
        *,
        model: str,
        system_prompt: str,
        budget: ContextBudget,
    ) -> None:
        self._sessions = sessions
        self._store = store
        self._provider = provider
        self._registry = registry
        self._model = model
        self._system_prompt = system_prompt
        self._budget = budget

    @activity.defn(name="call_model")
    async def call_model(self, inp: ModelCallInput) -> ModelCallResult:
        """One model step. Retries after the reply was committed return the committed reply."""
        session_id = uuid.UUID(inp.session_id)
        async with storage_errors_are_final():
            async with self._sessions() as db:
                items = ItemRepository(db, inp.tenant_id)
                done = await items.by_key(inp.idempotency_key)
                if done is not None:
                    return await self._result_of(items, done)
                await SessionRepository(db, inp.tenant_id).get(session_id)
                context = await self._assemble(db, inp.tenant_id, session_id)
            # No transaction is held open across the provider call.
            reply = await self._provider.complete(
                ModelRequest(
                    model=self._model,
                    messages=context.messages,
                    tools=self._registry.specs(),
                    idempotency_key=inp.idempotency_key,
                    max_output_tokens=self._budget.reply_tokens,
                )
            )
            activity.logger.info(
                "model step %s: %d input tokens, %d expanded, %d truncated, %d tool calls",
                inp.step,
                context.input_tokens,
                context.expanded,
                context.truncated,
                len(reply.tool_calls),
            )
            async with self._sessions() as db, db.begin():
                items = ItemRepository(db, inp.tenant_id)
                row = await self._persist(items, inp, session_id, reply, context)
                return await self._result_of(items, row)

    async def _assemble(
        self, db: AsyncSession, tenant_id: str, session_id: uuid.UUID
    ) -> AssembledContext:
        rows = await ItemRepository(db, tenant_id).page(session_id)
        artifacts = ArtifactRepository(db, tenant_id)

        async def fetch(artifact_id: uuid.UUID) -> tuple[bytes, str]:
            row = await artifacts.get(artifact_id)
            ref = self._store.ref_for(tenant_id, row.sha256, row.size_bytes, row.content_type)
            return await self._store.get(tenant_id, ref), row.content_type

        return await assemble_context(
            rows,
            system_prompt=self._system_prompt,
            tools=self._registry.specs(),
            budget=self._budget,
            fetch=fetch,
        )

    async def _persist(
        self,
        items: ItemRepository,
        inp: ModelCallInput,
        session_id: uuid.UUID,
        reply: ModelReply,
        context: AssembledContext,
    ) -> ItemRow:
        row, _ = await items.append(
            NewItem(
                session_id=session_id,
                kind="assistant_message",
                role="assistant",
                idempotency_key=inp.idempotency_key,
                text=reply.text,
                data={
                    "step": inp.step,
                    "tool_calls": [{"id": c.id, "name": c.name} for c in reply.tool_calls],
                    "finish_reason": reply.finish_reason,
                    "model": reply.model or self._model,
                    "provider": self._provider.name,
                    "usage": {
                        "input_tokens": reply.usage.input_tokens,
                        "output_tokens": reply.usage.output_tokens,
                    },
                    "context": {
                        "input_tokens": context.input_tokens,
                        "expanded": context.expanded,
                        "truncated": context.truncated,
                        "not_expanded": context.not_expanded,
                        "dropped_messages": context.dropped_messages,
                    },
                },
            )
        )
        for call in reply.tool_calls:
            await items.append(
                NewItem(
                    session_id=session_id,
                    kind="tool_call",
                    role="assistant",
                    idempotency_key=f"{inp.idempotency_key}:call:{call.id}",
                    text=f"{call.name}",
                    tool_call_id=call.id,
                    tool_name=call.name,
                    data={"arguments": call.arguments, "step": inp.step},
                )
            )
        return row

    async def _result_of(self, items: ItemRepository, row: ItemRow) -> ModelCallResult:
        calls = []
        for call in row.data.get("tool_calls", []):
            tool = self._registry.get(call["name"])
            call_items = await items.for_tool_call(row.session_id, call["id"])
            call_row = next(i for i in call_items if i.kind == "tool_call")
            calls.append(
                ToolCallRef(
                    tool_call_id=call["id"],
                    name=call["name"],
                    item_id=str(call_row.id),
                    needs_approval=bool(tool and tool.needs_approval),
                    known=tool is not None,
                )
            )
        return ModelCallResult(
            item_id=str(row.id),
            ordinal=row.ordinal,
            tool_calls=calls,
            finished=not calls,
            finish_reason=str(row.data.get("finish_reason", "stop")),
        )


def artifact_info(ref: ArtifactRef) -> dict[str, object]:
    """What a tool_result item keeps about its artifact, for notes and readers."""
    return {
        "sha256": ref.sha256,
        "size_bytes": ref.size_bytes,
        "content_type": ref.content_type,
        "key": ref.key,
    }
