"""Memory tools (remember, recall, forget) and their PostgreSQL-backed MemoryAccess.

Memories outlive sessions: an agent-scoped memory is shared by every session of that agent in
the tenant; user and project scopes are shared by whichever agents name the same scope id.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.tools.base import MemoryAccess, Tool, ToolContext, ToolError, ToolFn
from durable_agents.activities.tools.typed import tool
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.errors import MemoryNotFound
from durable_agents.storage.memories import MAX_CONTENT_CHARS
from durable_agents.storage.models import MemoryRow

DEFAULT_RECALL_LIMIT = 10
MAX_TOOL_RECALL_LIMIT = 50


def memory_dict(row: MemoryRow) -> dict[str, Any]:
    """A memory as plain JSON-ready data."""
    return {
        "id": str(row.id),
        "scope_type": row.scope_type,
        "scope_id": row.scope_id,
        "content": row.content,
        "version": row.version,
        "created_by": row.created_by,
        "created_at": row.created_at.isoformat(),
        "source": row.source,
        "supersedes": None if row.supersedes_id is None else str(row.supersedes_id),
    }


class SqlMemoryAccess:
    """MemoryAccess on AgentState, bound to one tenant; each call is its own unit of work."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        tenant_id: str,
        *,
        created_by: str = "agent",
    ) -> None:
        self._sessions = sessions
        self._tenant = tenant_id
        self._created_by = created_by

    async def remember(
        self,
        *,
        scope_type: str,
        scope_id: str,
        content: str,
        source: dict[str, Any],
        idempotency_key: str,
        supersedes: str | None = None,
    ) -> dict[str, Any]:
        """Store a memory once per idempotency key; MemoryNotFound if `supersedes` isn't live."""
        supersedes_id = None if supersedes is None else uuid.UUID(supersedes)
        async with agent_state(self._sessions, self._tenant, write=True) as st:
            row = await st.memories.remember(
                scope_type,
                scope_id,
                content,
                source=source,
                created_by=self._created_by,
                idempotency_key=idempotency_key,
                supersedes_id=supersedes_id,
            )
            return memory_dict(row)

    async def recall(
        self, *, scope_type: str, scope_id: str, query: str | None, limit: int
    ) -> list[dict[str, Any]]:
        """Live memories of a scope, newest first, optionally matching any query word."""
        async with agent_state(self._sessions, self._tenant, write=True) as st:
            rows = await st.memories.recall(scope_type, scope_id, query=query, limit=limit)
            return [memory_dict(r) for r in rows]

    async def forget(self, *, memory_id: str) -> bool:
        """Soft-delete a live memory; False if there is no such live memory for this tenant."""
        try:
            parsed = uuid.UUID(memory_id)
        except ValueError:
            return False  # a malformed id names no memory
        async with agent_state(self._sessions, self._tenant, write=True) as st:
            return await st.memories.forget(parsed)


# --- arguments -----------------------------------------------------------------------

Scope = Literal["agent", "user", "project"]


def _invalid(message: str) -> ToolError:
    return ToolError("InvalidArguments", message)


def _scope(ctx: ToolContext, scope: Scope, scope_id: str | None) -> tuple[str, str]:
    scope_id = (scope_id or "").strip()
    if not scope_id:
        if scope != "agent":
            raise _invalid(f"scope {scope!r} needs a 'scope_id' (which {scope} it is)")
        scope_id = ctx.agent_name
    return scope, scope_id


def _memory(ctx: ToolContext) -> MemoryAccess:
    if ctx.memory is None:
        raise ToolError("MemoryUnavailable", "memory is not available to this agent here")
    return ctx.memory


# --- tools ---------------------------------------------------------------------------


# Idempotent: a retried call under the same key stores the memory once (the repository
# upserts on the key).
@tool(effect="idempotent", name="remember")
async def remember_tool(
    ctx: ToolContext,
    content: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_CONTENT_CHARS)
    ],
    scope: Scope = "agent",
    scope_id: str | None = None,
    supersedes: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Store a short fact for later sessions. To correct a memory, pass its id as
    'supersedes': the old version is hidden and the new one gets the next version.

    Args:
        content: The fact to remember.
        scope: Whose memory: this agent's own (default), a user's, or a project's.
        scope_id: Which user or project (required for those); defaults to this agent.
        supersedes: Id of the memory this replaces.
    """
    memory = _memory(ctx)
    scope_type, scope_key = _scope(ctx, scope, scope_id)
    try:
        stored = await memory.remember(
            scope_type=scope_type,
            scope_id=scope_key,
            content=content,
            source={"session_id": ctx.session_id, "kind": "tool"},
            idempotency_key=ctx.idempotency_key,
            supersedes=None if supersedes is None else str(supersedes),
        )
    except MemoryNotFound as err:
        raise ToolError("MemoryNotFound", str(err)) from err
    return {"memory": stored}


@tool(effect="read_only", name="recall")
async def recall_tool(
    ctx: ToolContext,
    query: str | None = None,
    scope: Scope = "agent",
    scope_id: str | None = None,
    # Larger limits are cut to the maximum rather than refused, so the schema only says it.
    limit: Annotated[int, Field(ge=1, json_schema_extra={"maximum": MAX_TOOL_RECALL_LIMIT})] = (
        DEFAULT_RECALL_LIMIT
    ),
) -> dict[str, Any]:
    """List remembered facts of a scope, newest first. With a query, only memories
    containing any of its words (case-insensitive).

    Args:
        query: Words to look for; without it, the newest memories.
        scope: Whose memory: this agent's own (default), a user's, or a project's.
        scope_id: Which user or project (required for those); defaults to this agent.
        limit: At most this many memories.
    """
    memory = _memory(ctx)
    scope_type, scope_key = _scope(ctx, scope, scope_id)
    words = (query or "").strip() or None
    found = await memory.recall(
        scope_type=scope_type,
        scope_id=scope_key,
        query=words,
        limit=min(limit, MAX_TOOL_RECALL_LIMIT),
    )
    return {"scope": scope_type, "scope_id": scope_key, "query": words, "memories": found}


# Idempotent: forgetting a forgotten memory is a no-op.
@tool(effect="idempotent", name="forget")
async def forget_tool(ctx: ToolContext, memory_id: uuid.UUID) -> dict[str, Any]:
    """Forget a memory by id (it stops appearing in recall).

    Args:
        memory_id: Id from recall.
    """
    memory = _memory(ctx)
    forgotten = await memory.forget(memory_id=str(memory_id))
    return {"memory_id": str(memory_id), "forgotten": forgotten}


# The tools' functions (arguments as JSON), for callers that run them directly.
remember: ToolFn = remember_tool.fn
recall: ToolFn = recall_tool.fn
forget: ToolFn = forget_tool.fn


def memory_tools() -> list[Tool]:
    """The memory tools.

    None needs approval: they touch only this tenant's own memory, and forgetting is a soft
    delete. remember and forget change stored state but are idempotent under the call's key.
    """
    return [remember_tool, recall_tool, forget_tool]
