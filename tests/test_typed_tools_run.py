"""Typed tools in a real task: invalid arguments reach the model as a tool error (no retry,
the run goes on), results are stored with their content type, and read_artifact finds a
result of the task by its sha256 prefix."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import uuid
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolContext, ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.activities.tools.typed import tool
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, session_root, start


class Forecast(BaseModel):
    city: str
    days: int


@tool(effect="read_only")
async def forecast(
    ctx: ToolContext, city: str, days: Annotated[int, Field(ge=1, le=7)] = 3
) -> Forecast:
    """The weather ahead.

    Args:
        city: The city.
        days: How many days ahead.
    """
    return Forecast(city=city, days=days)


@tool(effect="read_only")
def shout(text: str) -> str:
    """Say it louder (a plain def, run in a thread)."""
    assert threading.current_thread() is not threading.main_thread()
    return text.upper()


@tool(effect="read_only")
async def peek(ctx: ToolContext, artifact: str) -> bytes:
    """The first bytes of a stored result, read through the context's artifact access.

    Args:
        artifact: Its id or sha256 prefix.
    """
    assert ctx.artifacts is not None
    return await ctx.artifacts.read(artifact, 0, 5)


async def test_typed_tools_in_a_run(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    big = "".join(f"line {i}: {'needle' if i == 4321 else 'hay'}\n" for i in range(10_000))
    sha = hashlib.sha256(big.encode()).hexdigest()
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "forecast", "arguments": {"city": 7, "days": 30, "x": 1}},
                    {"name": "forecast", "arguments": {"city": 7, "days": 30}},
                    {"name": "forecast", "arguments": {"city": "Lyon"}},
                    {"name": "shout", "arguments": {"text": "hi"}},
                    {"name": "read_file", "arguments": {"path": "big.txt"}},
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "read_artifact",
                        "arguments": {"artifact": sha[:10], "pattern": "needle"},
                    },
                    {"name": "peek", "arguments": {"artifact": sha[:10]}},
                ]
            },
        ]
    )
    registry = ToolRegistry.of([*builtin_tools(), forecast, shout, peek])
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "big.txt").write_text(big)
    async with agent_worker(provider, workspace, registry=registry) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) == 1, "an invalid argument was retried"
    results = {
        r.tool_call_id: r for r in await items_of(resources, tenant, session_id)
        if r.kind == "tool_result"
    }  # fmt: skip
    unknown, invalid = results["call_0_0"], results["call_0_1"]
    assert unknown.data["error_type"] == invalid.data["error_type"] == "InvalidArguments"
    assert "unknown argument 'x'; this tool takes: 'city', 'days'" in unknown.text
    assert "argument 'city': Input should be a valid string" in invalid.text
    assert "argument 'days': Input should be less than or equal to 7" in invalid.text
    # The model was told, in the next request.
    told = [m.content for m in provider.requests[1].messages if m.role == "tool"]
    assert any("argument 'days'" in t for t in told)

    async with resources.sessions() as db:
        stored = await ArtifactRepository(db, tenant).get_many(
            [r.artifact_id for r in results.values() if r.artifact_id is not None]
        )
    kinds = {c: stored[r.artifact_id].content_type for c, r in results.items() if r.artifact_id}
    assert kinds["call_0_2"] == "application/json"
    assert kinds["call_0_3"] == "text/plain; charset=utf-8"
    assert '"city":"Lyon"' in results["call_0_2"].text and results["call_0_3"].text == "HI"

    grep = results["call_1_0"].text
    assert "1 of 10000 lines match 'needle'" in grep and "4322 @" in grep
    assert kinds["call_1_1"] == "application/octet-stream" and results["call_1_1"].text == "line "
