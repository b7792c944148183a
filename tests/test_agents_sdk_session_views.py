"""An OpenAI Agents SDK conversation kept in AgentState (workers/peers/openai_agents_session.py)
as our surfaces show it: `agentctl show` and `sessions`, the gateway's session routes for its
own tenant only, and a watch following the items the SDK adds."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

# The `peers` extra (pyproject.toml).
pytest.importorskip("agents")

from temporalio.client import Client

from durable_agents.storage.models import ItemRow
from durable_agents.workers.client.render import item_line
from durable_agents.workers.client.watch.follow import watch_changes
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, gateway_http, make_key
from tests.support.helpers import agentctl
from tests.support.sdk_sessions import BIG, big_output, conversation, session


async def test_the_session_shows_in_agentctl_and_the_gateway(
    cli_env: None,
    resources: Resources,
    tenant: str,
    stack: StackEndpoints,
    client: Client,
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = big_output("shown")
    kept = session(resources, "shown", tenant)
    await kept.add_items(conversation(output))
    sid = str(kept.agentstate_id)

    code, out, err = await agentctl(capsys, "show", sid)
    assert code == 0, err
    assert "agent external:openai-agents" in out
    assert "Weather in Oslo?" in out and "It is sunny." in out
    assert "forecast" in out and "call_1" in out
    sha = hashlib.sha256(output.encode()).hexdigest()
    assert f"{sha[:12]} {BIG} B" in out

    code, out, err = await agentctl(capsys, "sessions")
    assert code == 0, err
    assert sid in out and "external:openai-agents" in out

    key = await make_key(resources, tenant, "read")
    async with gateway_http(stack, resources, client) as http:
        page = (await http.get(f"/v1/sessions/{sid}", headers=bearer(key))).json()
        assert page["session"]["id"] == sid
        assert [i["kind"] for i in page["items"]] == [
            "user_message",
            "tool_call",
            "tool_result",
            "assistant_message",
        ]
        assert page["items"][2]["artifact_id"] is not None
        assert page["items"][2]["data"]["artifact"]["sha256"] == sha
        link = await http.get(
            f"/v1/artifacts/{page['items'][2]['artifact_id']}", headers=bearer(key)
        )
        # Compressed objects are streamed here, raw ones are a redirect to the store.
        assert link.status_code in (200, 307)
        if link.status_code == 200:
            assert link.content == output.encode()
        listed = (await http.get("/v1/sessions", headers=bearer(key))).json()["sessions"]
        assert [(s["id"], s["agent"]) for s in listed] == [(sid, "external:openai-agents")]
        # No loop of ours runs it: task actions are refused in our words, not a 500.
        starter = await make_key(resources, tenant, "start")
        for action, body in (("messages", {"text": "hi"}), ("cancel", None)):
            refused = await http.post(
                f"/v1/sessions/{sid}/{action}", json=body, headers=bearer(starter)
            )
            assert refused.status_code == 409, refused.text
        other = await make_key(resources, f"{tenant}-other", "read")
        missing = await http.get(f"/v1/sessions/{sid}", headers=bearer(other))
        assert missing.status_code == 404


async def test_a_watch_follows_the_items_the_sdk_adds(resources: Resources, tenant: str) -> None:
    kept = session(resources, "watched", tenant)
    await kept.add_items([{"role": "user", "content": "first"}])
    lines: list[str] = []

    async def follow() -> None:
        sid = str(kept.agentstate_id)
        async for change in watch_changes(resources.sessions, tenant, sid, poll_seconds=0.1):
            if isinstance(change, ItemRow):
                lines.append(item_line(change))
                if len(lines) == 5:
                    return

    watcher = asyncio.create_task(follow())
    await asyncio.sleep(0.5)  # the watch has caught up and waits for more
    await kept.add_items(conversation())
    await asyncio.wait_for(watcher, 30)
    assert lines == [
        "#1   user     first",
        "#2   user     Weather in Oslo?",
        "#3   call     forecast(place=Oslo)  [call_1]",
        "#4   result   forecast [call_1] sunny",
        "#5   model    It is sunny.",
    ]
