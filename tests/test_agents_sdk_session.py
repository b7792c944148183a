"""The OpenAI Agents SDK's Session protocol kept in AgentState
(workers/peers/openai_agents_session.py) on the real PostgreSQL and S3: the SDK's own
semantics (checked against its SQLiteSession), a real Runner across two runs, a large tool
output stored once by reference, the tenant boundary, a session written by another process,
removal and any item's round trip (how our surfaces show it: test_agents_sdk_session_views.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import uuid
from typing import Any

import pytest

# The `peers` extra (pyproject.toml).
pytest.importorskip("agents")

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
)
from openai import AsyncOpenAI

from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import artifact_key
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.quotas import Quotas, TenantControls
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.turns import TurnRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.peers.external_history import NotExternalSession
from durable_agents.workers.resources import Resources
from tests.support.fake_openai import (  # noqa: F401 (the `server` fixture)
    FakeOpenAI,
    calls,
    fake_openai_server,
    says,
)
from tests.support.helpers import s3_keys
from tests.support.sdk_sessions import big_output, conversation, rows, session


async def test_session_semantics_match_the_sdks_sqlite_session(
    resources: Resources, tenant: str
) -> None:
    ours = session(resources, "user-42", tenant)
    theirs = SQLiteSession("user-42")  # in memory: the SDK's own reference implementation

    async def both(op: str, *args: Any) -> Any:
        mine = await getattr(ours, op)(*args)
        expected = await getattr(theirs, op)(*args)
        assert mine == expected, op
        return mine

    assert await both("get_items") == []
    assert await both("pop_item") is None
    await both("add_items", conversation())
    await both("add_items", [{"role": "user", "content": "And tomorrow?"}])
    assert len(await both("get_items")) == 5
    for limit in (1, 2, 5, 9, 0, -1):
        await both("get_items", limit)
    popped = await both("pop_item")
    assert popped == {"role": "user", "content": "And tomorrow?"}
    assert len(await both("get_items")) == 4
    await both("clear_session")
    assert await both("get_items") == []
    assert await both("pop_item") is None
    await both("add_items", [{"role": "user", "content": "Start again."}])
    await both("get_items")

    # Written as our readers expect: the kinds, the call's arguments, one turn per user message.
    stored = await rows(resources, tenant, ours.agentstate_id)
    assert [r.kind for r in stored] == [ItemKind.USER_MESSAGE]
    await ours.clear_session()
    await ours.add_items(conversation())
    stored = await rows(resources, tenant, ours.agentstate_id)
    assert [(r.kind, r.tool_name, r.text) for r in stored] == [
        (ItemKind.USER_MESSAGE, None, "Weather in Oslo?"),
        (ItemKind.TOOL_CALL, "forecast", ""),
        (ItemKind.TOOL_RESULT, "forecast", "sunny"),
        (ItemKind.ASSISTANT_MESSAGE, None, "It is sunny."),
    ]
    assert stored[1].data["arguments"] == {"place": "Oslo"}


async def test_a_large_tool_output_is_stored_once_in_s3_by_reference(
    resources: Resources, tenant: str
) -> None:
    output = big_output("once")
    first, second = session(resources, "a", tenant), session(resources, "b", tenant)
    await first.add_items(conversation(output))
    await first.add_items([{"role": "user", "content": "again"}, *conversation(output)[1:]])
    await second.add_items(conversation(output))

    sha = hashlib.sha256(output.encode()).hexdigest()
    prefix = f"{resources.store.prefix}/{tenant}/"
    assert await s3_keys(resources, prefix) == [artifact_key(resources.store.prefix, tenant, sha)]
    results = [r for r in await rows(resources, tenant, first.agentstate_id) if r.artifact_id]
    assert len(results) == 2
    for row in results:
        assert row.kind == ItemKind.TOOL_RESULT
        assert row.data["artifact"]["sha256"] == sha
        assert len(json.dumps(row.data)) < 1000 and len(row.text) <= 500  # a reference
    got: list[Any] = await first.get_items()
    assert got[2]["output"] == output and got[6]["output"] == output
    again = [{"role": "user", "content": "again"}, *conversation(output)[1:]]
    assert got == [*conversation(output), *again]
    assert await second.get_items(1) == conversation(output)[-1:]


async def test_another_tenant_cannot_read_or_change_the_session(
    resources: Resources, tenant: str
) -> None:
    mine = session(resources, "user-42", tenant)
    await mine.add_items(conversation())
    other = f"{tenant}-other"
    by_id = session(resources, str(mine.agentstate_id), other)
    assert await by_id.get_items() == []
    assert await by_id.pop_item() is None
    await by_id.clear_session()
    with pytest.raises(SessionNotFound):
        await by_id.add_items([{"role": "user", "content": "let me in"}])
    same_name = session(resources, "user-42", other)
    assert same_name.agentstate_id != mine.agentstate_id
    assert await same_name.get_items() == []
    assert await mine.get_items() == conversation()


WRITER = """
import asyncio, sys
from durable_agents import AgentStateSession

async def main() -> None:
    session = AgentStateSession(sys.argv[1])  # tenant and stores from the environment
    await session.add_items([{"role": "user", "content": "written by another process"}])
    await session.aclose()

asyncio.run(main())
"""


async def test_a_session_written_by_another_process_is_read_here(
    cli_env: None, resources: Resources, tenant: str
) -> None:
    writer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, "laptop", stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(writer.communicate(), 120)
    assert writer.returncode == 0, err.decode()[-2000:]
    assert await session(resources, "laptop", tenant).get_items() == [
        {"role": "user", "content": "written by another process"}
    ]


async def test_a_runner_across_two_runs_sees_the_first_runs_history(
    resources: Resources, tenant: str, server: FakeOpenAI
) -> None:
    output = big_output("runner", 50_000)

    @function_tool
    def forecast(place: str) -> str:
        """Tomorrow's weather."""
        return output

    model = OpenAIChatCompletionsModel(
        "gpt-fake", AsyncOpenAI(base_url=server.url, api_key="fake", max_retries=0)
    )
    agent = Agent(name="weather", instructions="Forecast.", model=model, tools=[forecast])
    config = RunConfig(tracing_disabled=True)
    server.queued = [calls({"name": "forecast", "arguments": {"place": "Oslo"}}), says("Sunny.")]
    server.reply = says("You asked about Oslo.")

    first = await Runner.run(
        agent, "Weather in Oslo?", session=session(resources, "chat", tenant), run_config=config
    )
    assert first.final_output == "Sunny."
    # A new object, as a later request in another process would build it.
    again = session(resources, "chat", tenant)
    second = await Runner.run(agent, "What did I ask?", session=again, run_config=config)
    assert second.final_output == "You asked about Oslo."

    sent = server.requests[2].body["messages"]
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert sent[1]["content"] == "Weather in Oslo?" and sent[3]["content"] == output
    assert sent[4]["content"] == "Sunny." and sent[5]["content"] == "What did I ask?"
    kinds = [r.kind for r in await rows(resources, tenant, again.agentstate_id)]
    assert kinds == [
        ItemKind.USER_MESSAGE,
        ItemKind.TOOL_CALL,
        ItemKind.TOOL_RESULT,
        ItemKind.ASSISTANT_MESSAGE,
        ItemKind.USER_MESSAGE,
        ItemKind.ASSISTANT_MESSAGE,
    ]


async def test_removed_items_release_their_artifact_once_no_item_names_it(
    resources: Resources, tenant: str
) -> None:
    output = big_output("released")
    kept = session(resources, "undo", tenant)
    await kept.add_items(conversation(output))
    await kept.add_items(conversation(output)[1:3])  # the same output again: one object
    artifact_id = next(
        r.artifact_id
        for r in await rows(resources, tenant, kept.agentstate_id)
        if r.artifact_id is not None
    )

    async def required() -> bool:
        async with resources.sessions() as db:
            (ref,) = await ArtifactRepository(db, tenant).refs_of(artifact_id)
        assert ref.owner_id == str(kept.agentstate_id)
        return ref.required_for_resume and ref.expires_at is None

    assert await required()
    popped: Any = await kept.pop_item()
    assert popped["output"] == output  # read back before it went
    assert await required()  # the first output still names it
    await kept.clear_session()
    assert not await required()  # GC may take it after its window
    async with resources.sessions() as db:
        turns = await TurnRepository(db, tenant).for_session(kept.agentstate_id)
    assert turns == []
    await kept.add_items(conversation(output))  # continues the session, required again
    assert await required()


async def test_items_with_a_nul_or_of_any_size_come_back_as_added(
    resources: Resources, tenant: str
) -> None:
    # PostgreSQL's text and jsonb refuse U+0000: such items live in their artifact.
    added: list[Any] = [
        {"role": "user", "content": "a\x00b"},
        {"type": "function_call_output", "call_id": "c", "output": "bin\x00ary"},
        {"role": "user", "content": big_output("long question", 40_000)},
        {
            "type": "function_call_output",
            "call_id": "d",
            "output": [{"type": "input_text", "text": big_output("parts", 30_000)}],
        },
    ]
    kept = session(resources, "odd", tenant)
    await kept.add_items(added)
    assert await kept.get_items() == added
    stored = await rows(resources, tenant, kept.agentstate_id)
    assert all(r.artifact_id is not None and "\x00" not in r.text for r in stored)
    assert [r.data["artifact"]["content_type"] for r in stored] == [
        "application/json",
        "text/plain; charset=utf-8",
        "application/json",
        "application/json",
    ]


async def test_sdk_conversations_do_not_count_as_running_tasks_or_starts(
    resources: Resources, tenant: str
) -> None:
    # A conversation another SDK keeps is not a task of ours: a tenant with many of them
    # may still start a task under its running_tasks and starts_per_minute quotas.
    for n in range(3):
        await session(resources, f"chat-{n}", tenant).add_items(conversation())
    quotas = Quotas(running_tasks=1, parked_tasks=1, starts_per_minute=1)
    async with resources.sessions() as db:
        await TenantControls(db, tenant).check_start(quotas)


async def test_a_session_of_our_own_loop_is_not_opened_as_an_sdk_session(
    resources: Resources, tenant: str
) -> None:
    ours = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(ours, title="a task", model_config={})
    with pytest.raises(NotExternalSession):
        await session(resources, str(ours), tenant).add_items([{"role": "user", "content": "x"}])
    with pytest.raises(NotExternalSession):
        await session(resources, str(ours), tenant).get_items()
    assert await rows(resources, tenant, ours) == []
