"""pydantic-ai's message history kept in AgentState (workers/peers/pydantic_ai_history.py) on the
real PostgreSQL and S3: an Agent (its model faked through pydantic-ai's own FunctionModel)
loads the history before a run and appends the run's new messages after it; the second run
sees the first, a large tool return is one S3 object by reference, and the conversation
reads in `agentctl show`."""

from __future__ import annotations

import hashlib
import json

import pytest

# The `peers` extra (pyproject.toml).
pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from durable_agents import AgentStateHistory
from durable_agents.storage.artifacts import artifact_key
from durable_agents.storage.items import ItemRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.peers.claim_check import ClaimCheckStore
from durable_agents.workers.resources import Resources
from tests.support.helpers import agentctl, s3_keys

RESULT = (hashlib.sha256(b"shelf").hexdigest() * 4000)[:150_000]


def model(seen: list[list[ModelMessage]]) -> FunctionModel:
    """Calls `lookup` once per new question, then answers with how many results it read."""

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(p, UserPromptPart) for p in last.parts
        ):
            return ModelResponse(parts=[ToolCallPart("lookup", {"shelf": "b"}, "call_1")])
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(f"read {len(returns)} results")])

    return FunctionModel(reply)


def history(res: Resources, key: str, tenant: str) -> AgentStateHistory:
    return AgentStateHistory(key, tenant=tenant, store=ClaimCheckStore(res.store, res.sessions))


async def test_an_agent_loads_and_saves_its_history_across_runs(
    cli_env: None,
    resources: Resources,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen: list[list[ModelMessage]] = []
    agent = Agent(model(seen), instructions="Look things up.")

    @agent.tool_plain
    def lookup(shelf: str) -> str:
        """What is on a shelf."""
        return RESULT

    kept = history(resources, "reader", tenant)
    assert await kept.load() == []
    first = await agent.run("What is on shelf b?", message_history=await kept.load())
    await kept.append(first.new_messages())
    assert first.output == "read 1 results"

    # Another request, another object: what the first run saved is the history.
    later = history(resources, "reader", tenant)
    loaded = await later.load()
    assert loaded == first.all_messages()
    second = await agent.run("And again?", message_history=loaded)
    await later.append(second.new_messages())
    assert second.output == "read 2 results"
    sent = seen[2]  # the second run's first model call
    assert sent[: len(first.all_messages())] == first.all_messages()
    assert await later.load() == second.all_messages()

    # The tool's return: one object in S3, named by reference from its item.
    sha = hashlib.sha256(RESULT.encode()).hexdigest()
    keys = await s3_keys(resources, f"{resources.store.prefix}/{tenant}/")
    assert keys == [artifact_key(resources.store.prefix, tenant, sha)]
    async with resources.sessions() as db:
        rows = await ItemRepository(db, tenant).page(later.agentstate_id)
    assert [r.kind for r in rows] == [
        ItemKind.USER_MESSAGE,
        ItemKind.TOOL_CALL,
        ItemKind.TOOL_RESULT,
        ItemKind.ASSISTANT_MESSAGE,
    ] * 2
    for row in rows:
        assert len(json.dumps(row.data)) < 4000  # the return is not in the row
    assert rows[2].tool_name == "lookup" and rows[2].data["artifact"]["sha256"] == sha
    assert rows[1].data["arguments"] == {"shelf": "b"}

    code, out, err = await agentctl(capsys, "show", str(later.agentstate_id))
    assert code == 0, err
    assert "agent external:pydantic-ai" in out
    assert "What is on shelf b?" in out and "read 2 results" in out
    assert f"{sha[:12]} {len(RESULT)} B" in out

    # Another tenant sees nothing under the same id, and cannot clear it.
    other = history(resources, str(later.agentstate_id), f"{tenant}-other")
    assert await other.load() == []
    await other.clear()
    assert await later.load() == second.all_messages()
    await later.clear()
    assert await later.load() == []
