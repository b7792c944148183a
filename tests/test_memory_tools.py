"""The remember / recall / forget tools over a real SqlMemoryAccess."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.memory import SqlMemoryAccess, forget, recall, remember
from durable_agents.storage.memories import MAX_CONTENT_CHARS
from durable_agents.workers.resources import Resources
from tests.test_memories import row_count

# --- tools ---------------------------------------------------------------------------


def tool_ctx(
    res: Resources | None, tenant: str, key: str = "call-1", agent: str = "a"
) -> ToolContext:
    memory = None if res is None else SqlMemoryAccess(res.sessions, tenant)
    return ToolContext(
        idempotency_key=key,
        workspace=Path("unused"),
        tenant_id=tenant,
        session_id="s1",
        agent_name=agent,
        memory=memory,
    )


def body(content: bytes) -> dict[str, Any]:
    value = json.loads(content)
    assert isinstance(value, dict)
    return value


async def test_tool_remember_then_recall(resources: Resources, tenant: str) -> None:
    stored = body(
        (await remember(tool_ctx(resources, tenant), {"content": " tea, no sugar "})).content
    )
    memory = stored["memory"]
    assert (memory["content"], memory["scope_type"], memory["scope_id"]) == (
        "tea, no sugar",
        "agent",
        "a",
    )
    assert memory["source"] == {"session_id": "s1", "kind": "tool"}

    found = body((await recall(tool_ctx(resources, tenant, "c2"), {"query": "TEA"})).content)
    assert [m["id"] for m in found["memories"]] == [memory["id"]]
    other_agent = tool_ctx(resources, tenant, "c3", agent="b")
    assert body((await recall(other_agent, {})).content)["memories"] == []


async def test_tool_supersede_and_forget(resources: Resources, tenant: str) -> None:
    ctx = tool_ctx(resources, tenant)
    user = {"scope": "user", "scope_id": "u1"}
    v1 = body((await remember(ctx, {"content": "v1", **user})).content)["memory"]
    args = {"content": "v2", "supersedes": v1["id"], **user}
    v2 = body((await remember(tool_ctx(resources, tenant, "c2"), args)).content)["memory"]
    assert (v2["version"], v2["supersedes"]) == (2, v1["id"])

    done = body((await forget(ctx, {"memory_id": v2["id"]})).content)
    assert done == {"memory_id": v2["id"], "forgotten": True}
    assert body((await recall(ctx, user)).content)["memories"] == []
    with pytest.raises(ToolError) as err:
        await remember(
            tool_ctx(resources, tenant, "c3"), {"content": "v3", "supersedes": v2["id"], **user}
        )
    assert err.value.error_type == "MemoryNotFound"


async def test_tool_retried_remember_stores_once(resources: Resources, tenant: str) -> None:
    ctx = tool_ctx(resources, tenant, key="wf:3:call-7")
    first = body((await remember(ctx, {"content": "fact"})).content)
    retry = body((await remember(ctx, {"content": "fact"})).content)

    assert retry == first
    assert await row_count(resources, tenant) == 1


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (remember, {}),
        (remember, {"content": "  "}),
        (remember, {"content": 5}),
        (remember, {"content": "x" * (MAX_CONTENT_CHARS + 1)}),
        (remember, {"content": "x", "scope": "team"}),
        (remember, {"content": "x", "scope": "user"}),
        (remember, {"content": "x", "supersedes": "not-a-uuid"}),
        (remember, {"_raw": "{oops"}),
        (recall, {"scope": "project"}),
        (recall, {"limit": 0}),
        (recall, {"limit": True}),
        (recall, {"query": ["a"]}),
        (forget, {}),
        (forget, {"memory_id": "x"}),
    ],
)
async def test_tool_bad_arguments(
    resources: Resources, tenant: str, tool: Any, args: dict[str, Any]
) -> None:
    with pytest.raises(ToolError) as err:
        await tool(tool_ctx(resources, tenant), args)
    assert err.value.error_type == "InvalidArguments"
    assert await row_count(resources, tenant) == 0


@pytest.mark.parametrize(
    ("tool", "args"),
    [(remember, {"content": "x"}), (recall, {}), (forget, {"memory_id": str(uuid.uuid4())})],
)
async def test_tool_without_memory_is_unavailable(tool: Any, args: dict[str, Any]) -> None:
    with pytest.raises(ToolError) as err:
        await tool(tool_ctx(None, "t"), args)
    assert err.value.error_type == "MemoryUnavailable"
