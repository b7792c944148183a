"""Free text never travels through workflow history: a rejecter's name and reason, a tool
name the model made up, the call ids it chose, and an exception's message stay in
AgentState (or nowhere)."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import decoded_payloads, items_of, start, wait_for_pending

REASON = "REASON-MARK-7f3a"
DECIDER = "DECIDER-MARK-7f3a"
TOOL_NAME = "TOOLNAME_MARK_7f3a"
ERROR = "ERROR-MARK-7f3a"
CALL_ID = "CALLID-MARK-7f3a"


def _flaky_tool() -> Tool:
    """Fails its first attempt with a message of its own, then works."""
    attempts: list[int] = []

    async def flaky(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError(errno.EIO, f"{ERROR}: disk said no about {args.get('path')}")
        return ToolOutput(content=b"fine")

    spec = ToolSpec(name="flaky", description="fails once", parameters={"type": "object"})
    # No effect to double: its retry runs again (an effectful one would be in doubt).
    return Tool(spec=spec, fn=flaky, effect="idempotent")


async def test_reasons_deciders_model_tool_names_and_exception_text_stay_out_of_history(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {"path": "a.md", "content": "A"},
                        "id": CALL_ID,
                    },
                    {"name": TOOL_NAME, "arguments": {}},
                    {"name": "flaky", "arguments": {"path": "p"}, "id": f"{CALL_ID}-2"},
                ]
            }
        ]
    )
    registry = ToolRegistry.of([*builtin_tools(), _flaky_tool()])
    async with agent_worker(provider, workspace, registry=registry) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, session_id)
        await verbs.reject(
            client,
            session_id,
            call,
            REASON,
            DECIDER,
            sessions=resources.sessions,
            tenant_id=tenant,
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"

    # The words are where they belong: in AgentState, and told to the model.
    committed = "\n".join(
        f"{i.text} {i.tool_name} {i.data}" for i in await items_of(resources, tenant, session_id)
    )
    assert REASON in committed and DECIDER in committed and TOOL_NAME in committed
    assert CALL_ID in committed  # the provider's id, kept to echo back to it
    told = "\n".join(m.content for m in provider.requests[1].messages if m.role == "tool")
    assert REASON in told and DECIDER in told and TOOL_NAME in told
    echoed = [m.tool_call_id for m in provider.requests[1].messages if m.role == "tool"]
    assert echoed == [CALL_ID, "call_0_1", f"{CALL_ID}-2"]

    # History: every payload decoded, and every failure message and cause as written.
    history = await handle.fetch_history()
    retried = [
        e.activity_task_started_event_attributes
        for e in history.events
        if e.activity_task_started_event_attributes.attempt > 1
    ]
    assert retried, "the flaky tool was expected to fail once and be retried"
    assert "OSError (EIO)" in retried[0].last_failure.message
    text = decoded_payloads(history) + history.to_json()
    for marker in (REASON, DECIDER, TOOL_NAME, ERROR, CALL_ID):
        assert marker not in text, f"{marker} found in workflow history"
