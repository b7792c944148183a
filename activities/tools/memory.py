"""Memory tools (remember, recall, forget) and their PostgreSQL-backed MemoryAccess.

Memories outlive sessions: an agent-scoped memory is shared by every session of that agent in
the tenant; user and project scopes are shared by whichever agents name the same scope id.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from activities.providers.base import ToolSpec
from activities.tools.base import MemoryAccess, Tool, ToolContext, ToolError, ToolOutput
from storage.errors import MemoryNotFound
from storage.memories import MAX_CONTENT_CHARS, MemoryRepository
from storage.models import MemoryRow

SCOPES = ("agent", "user", "project")
DEFAULT_RECALL_LIMIT = 10
MAX_TOOL_RECALL_LIMIT = 50
_JSON = "application/json"


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
        async with self._sessions() as db, db.begin():
            row = await MemoryRepository(db, self._tenant).remember(
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
        async with self._sessions() as db, db.begin():
            rows = await MemoryRepository(db, self._tenant).recall(
                scope_type, scope_id, query=query, limit=limit
            )
            return [memory_dict(r) for r in rows]

    async def forget(self, *, memory_id: str) -> bool:
        """Soft-delete a live memory; False if there is no such live memory for this tenant."""
        try:
            parsed = uuid.UUID(memory_id)
        except ValueError:
            return False  # a malformed id names no memory
        async with self._sessions() as db, db.begin():
            return await MemoryRepository(db, self._tenant).forget(parsed)


# --- argument handling ---------------------------------------------------------------


def _invalid(message: str) -> ToolError:
    return ToolError("InvalidArguments", message)


def _str_arg(args: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None:
        if required:
            raise _invalid(f"missing required argument {name!r} (string)")
        return None
    if not isinstance(value, str):
        raise _invalid(f"argument {name!r} must be a string, got {type(value).__name__}")
    return value


def _id_arg(args: dict[str, Any], name: str) -> str | None:
    value = _str_arg(args, name)
    if value is None:
        return None
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise _invalid(f"argument {name!r} must be a memory id (UUID), got {value!r}") from None


def _scope(ctx: ToolContext, args: dict[str, Any]) -> tuple[str, str]:
    scope = _str_arg(args, "scope") or "agent"
    if scope not in SCOPES:
        raise _invalid(f"argument 'scope' must be one of {', '.join(SCOPES)}; got {scope!r}")
    scope_id = (_str_arg(args, "scope_id") or "").strip()
    if not scope_id:
        if scope != "agent":
            raise _invalid(f"scope {scope!r} needs a 'scope_id' (which {scope} it is)")
        scope_id = ctx.agent_name
    return scope, scope_id


def _prepare(ctx: ToolContext, args: dict[str, Any]) -> MemoryAccess:
    if "_raw" in args:
        raise _invalid("the tool arguments were not valid JSON; send a JSON object")
    if ctx.memory is None:
        raise ToolError("MemoryUnavailable", "memory is not available to this agent here")
    return ctx.memory


def _json_output(payload: dict[str, Any], summary: str) -> ToolOutput:
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return ToolOutput(content=body, content_type=_JSON, summary=summary)


# --- tools ---------------------------------------------------------------------------


async def remember(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    """Store a memory (optionally replacing one); a retried call stores it only once."""
    memory = _prepare(ctx, args)
    content = (_str_arg(args, "content", required=True) or "").strip()
    if not content:
        raise _invalid("argument 'content' must not be empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise _invalid(f"argument 'content' is {len(content)} characters; max {MAX_CONTENT_CHARS}")
    scope, scope_id = _scope(ctx, args)
    supersedes = _id_arg(args, "supersedes")
    try:
        stored = await memory.remember(
            scope_type=scope,
            scope_id=scope_id,
            content=content,
            source={"session_id": ctx.session_id, "kind": "tool"},
            idempotency_key=ctx.idempotency_key,
            supersedes=supersedes,
        )
    except MemoryNotFound as err:
        raise ToolError("MemoryNotFound", str(err)) from err
    return _json_output({"memory": stored}, f"remembered {stored['id']} (v{stored['version']})")


async def recall(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    """Return live memories of a scope, newest first, optionally matching any query word."""
    memory = _prepare(ctx, args)
    query = (_str_arg(args, "query") or "").strip() or None
    scope, scope_id = _scope(ctx, args)
    limit = args.get("limit", DEFAULT_RECALL_LIMIT)
    # bool is an int subclass; "limit": true is a model mistake, not 1.
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise _invalid("argument 'limit' must be a positive integer")
    limit = min(limit, MAX_TOOL_RECALL_LIMIT)
    found = await memory.recall(scope_type=scope, scope_id=scope_id, query=query, limit=limit)
    payload = {"scope": scope, "scope_id": scope_id, "query": query, "memories": found}
    return _json_output(payload, f"recalled {len(found)} memories from {scope}:{scope_id}")


async def forget(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    """Soft-delete a memory by id; reports whether a live memory was forgotten."""
    memory = _prepare(ctx, args)
    memory_id = _id_arg(args, "memory_id")
    if memory_id is None:
        raise _invalid("missing required argument 'memory_id' (string)")
    forgotten = await memory.forget(memory_id=memory_id)
    summary = f"forgot {memory_id}" if forgotten else f"no live memory {memory_id}"
    return _json_output({"memory_id": memory_id, "forgotten": forgotten}, summary)


_SCOPE_PARAMS: dict[str, Any] = {
    "scope": {
        "type": "string",
        "enum": list(SCOPES),
        "default": "agent",
        "description": "Whose memory: this agent's own (default), a user's, or a project's.",
    },
    "scope_id": {
        "type": "string",
        "description": "Which user or project (required for those); defaults to this agent.",
    },
}

REMEMBER_SPEC = ToolSpec(
    name="remember",
    description=(
        "Store a short fact for later sessions. To correct a memory, pass its id as "
        "'supersedes': the old version is hidden and the new one gets the next version."
    ),
    parameters={
        "type": "object",
        "properties": {
            "content": {"type": "string", "maxLength": MAX_CONTENT_CHARS},
            **_SCOPE_PARAMS,
            "supersedes": {"type": "string", "description": "Id of the memory this replaces."},
        },
        "required": ["content"],
        "additionalProperties": False,
    },
)

RECALL_SPEC = ToolSpec(
    name="recall",
    description=(
        "List remembered facts of a scope, newest first. With a query, only memories "
        "containing any of its words (case-insensitive)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            **_SCOPE_PARAMS,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOOL_RECALL_LIMIT,
                "default": DEFAULT_RECALL_LIMIT,
            },
        },
        "additionalProperties": False,
    },
)

FORGET_SPEC = ToolSpec(
    name="forget",
    description="Forget a memory by id (it stops appearing in recall).",
    parameters={
        "type": "object",
        "properties": {"memory_id": {"type": "string", "description": "Id from recall."}},
        "required": ["memory_id"],
        "additionalProperties": False,
    },
)


def memory_tools() -> list[Tool]:
    """The memory tools.

    None needs approval: they touch only this tenant's own memory, and forgetting is a soft
    delete. remember and forget do change stored state, so they are marked side-effecting
    (remember is idempotent under the call's key; forget of a forgotten memory is a no-op).
    """
    return [
        # Upserts on the call's idempotency key: a second run under it changes nothing more.
        Tool(
            spec=REMEMBER_SPEC,
            fn=remember,
            effect="idempotent",
            side_effects=True,
            default_location="cloud",
        ),
        Tool(spec=RECALL_SPEC, fn=recall, effect="read_only", default_location="cloud"),
        Tool(
            spec=FORGET_SPEC,
            fn=forget,
            effect="idempotent",
            side_effects=True,
            default_location="cloud",
        ),
    ]
