"""Grammar tool mode over HTTP: the request carries the reply's schema and no `tools`, the
constrained reply comes back as a call or an answer, auto mode asks the server who it is,
and a task on the real stack runs a tool the model called this way."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.agents import Agent, AgentDefinitionError, ModelChoice
from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelProvider,
    ModelRequest,
    ProviderCall,
    ToolSpec,
)
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.providers.tool_grammar import grammar_tools
from durable_agents.workers.agent_loading import Providers
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import ModelSettings
from tests.conftest import AgentRunner
from tests.support.fake_openai import (
    FakeOpenAI,
    completion,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    says,
)
from tests.support.helpers import items_of, new_session_id, session_root, start

# What llama.cpp's server answers at GET /props (the part auto mode reads).
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
READ = ToolSpec("read_file", "Read a workspace file.", PATH)


def constrained(value: dict[str, Any]) -> dict[str, Any]:
    """A reply the server held to the schema: the JSON is the message's content."""
    return completion({"role": "assistant", "content": json.dumps(value)}, "stop")


def settings(server: FakeOpenAI, **fields: Any) -> ModelSettings:
    return ModelSettings.model_validate(
        {"provider": "openai", "base_url": server.url, "name": "m", **fields}
    )


def request(tools: list[ToolSpec] | None = None, **fields: Any) -> ModelRequest:
    return ModelRequest(
        model="m",
        messages=[ChatMessage("system", "Be careful."), ChatMessage("user", "Read a.txt.")],
        tools=[READ] if tools is None else tools,
        idempotency_key="s:1:model",
        **fields,
    )


async def complete(provider: ModelProvider, req: ModelRequest) -> Any:
    try:
        return await provider.complete(req)
    finally:
        await provider.aclose()


async def test_the_request_carries_the_schema_and_no_tools_and_a_call_comes_back(
    server: FakeOpenAI,
) -> None:
    server.reply = constrained({"tool": "read_file", "arguments": {"path": "a.txt"}})
    reply = await complete(build_provider(settings(server, tool_mode="grammar")), request())
    body = server.requests[0].body
    assert "tools" not in body and "tool_choice" not in body
    # No tool result yet: the first reply must call a tool, so the answer is left out.
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "tool_call_or_answer",
            "schema": grammar_tools([READ]).call_schema,
        },
    }
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be careful.\n\n## Tools")
    assert '"name": "read_file"' in system["content"]
    assert reply.tool_calls == [ProviderCall(id="", name="read_file", arguments={"path": "a.txt"})]
    assert (reply.text, reply.finish_reason) == ("", "tool_calls")
    assert server.props_requests == 0  # grammar chosen outright: nothing to ask


async def test_once_a_tool_result_is_in_the_conversation_the_reply_may_answer(
    server: FakeOpenAI,
) -> None:
    called = ProviderCall(id="c1", name="read_file", arguments={"path": "a.txt"})
    req = request()
    req = ModelRequest(
        model="m",
        messages=[
            *req.messages,
            ChatMessage("assistant", "", tool_calls=(called,)),
            ChatMessage("tool", "hello", tool_call_id="c1", name="read_file"),
        ],
        tools=[READ],
        idempotency_key="s:2:model",
    )
    server.reply = constrained({"answer": "It says hello."})
    reply = await complete(build_provider(settings(server, tool_mode="grammar")), req)
    schema = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema == grammar_tools([READ]).schema
    assert {"answer"} in [set(branch["properties"]) for branch in schema["anyOf"]]
    assert grammar_tools([READ]).call_schema == {"anyOf": schema["anyOf"][:-1]}
    assert reply.text == "It says hello."


async def test_a_request_that_requires_a_call_leaves_the_answer_out_after_tool_results(
    server: FakeOpenAI,
) -> None:
    called = ProviderCall(id="c1", name="read_file", arguments={"path": "a.txt"})
    req = replace(
        request(),
        messages=[
            *request().messages,
            ChatMessage("assistant", "", tool_calls=(called,)),
            ChatMessage("tool", "hello", tool_call_id="c1", name="read_file"),
            ChatMessage("user", "Your answer was not accepted: the task's check failed."),
        ],
        call_required=True,
    )
    server.reply = constrained({"tool": "read_file", "arguments": {"path": "b.txt"}})
    await complete(build_provider(settings(server, tool_mode="grammar")), req)
    schema = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema == grammar_tools([READ]).call_schema


async def test_a_withheld_tool_is_left_out_of_the_schema_and_the_prompt_stays(
    server: FakeOpenAI,
) -> None:
    listing = ToolSpec("list_dir", "List a directory.", {"type": "object", "properties": {}})
    called = ProviderCall(id="c1", name="read_file", arguments={"path": "a.txt"})
    after_a_result = [
        *request().messages,
        ChatMessage("assistant", "", tool_calls=(called,)),
        ChatMessage("tool", "Nothing new", tool_call_id="c1", name="read_file"),
    ]
    provider = build_provider(settings(server, tool_mode="grammar"))
    server.reply = constrained({"tool": "list_dir", "arguments": {}})
    base = replace(request([READ, listing]), messages=after_a_result)
    try:
        for req in (base, replace(base, withheld=("read_file",))):
            await provider.complete(req)
        # Withheld from a reply that must call; with every tool withheld, they are taken out
        # in their order while one is left.
        for req in (
            replace(base, withheld=("read_file",), call_required=True),
            replace(base, withheld=("read_file", "list_dir"), call_required=True),
        ):
            await provider.complete(req)
    finally:
        await provider.aclose()
    bodies = [r.body for r in server.requests]
    schemas = [b["response_format"]["json_schema"]["schema"]["anyOf"] for b in bodies]
    full = grammar_tools([READ, listing])
    assert schemas[0] == full.schema["anyOf"]  # type: ignore[index]
    assert schemas[1] == [full.schema["anyOf"][1], full.schema["anyOf"][2]]  # type: ignore[index]
    assert schemas[2] == [full.schema["anyOf"][1]]  # type: ignore[index]
    assert schemas[3] == [full.call_schema["anyOf"][1]]  # type: ignore[index]
    # The prompt still describes every tool: only the schema differs.
    assert len({json.dumps(b["messages"]) for b in bodies}) == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_an_answer_is_the_text_and_a_viewer_sees_only_its_words(
    server: FakeOpenAI, stream: bool
) -> None:
    words = 'The code word is "PELICAN".\nDone.'
    server.reply = constrained({"answer": words})
    heard: list[str] = []

    async def sink(piece: str) -> None:
        heard.append(piece)

    provider = build_provider(settings(server, tool_mode="grammar"))
    reply = await complete(provider, request(on_text=sink if stream else None))
    assert (reply.text, reply.tool_calls, reply.finish_reason) == (words, [], "stop")
    assert "".join(heard) == (words if stream else "")
    assert server.requests[0].body.get("stream", False) is stream


async def test_auto_is_grammar_on_llama_cpp_asked_once(server: FakeOpenAI) -> None:
    server.props = LLAMA_PROPS
    server.reply = constrained({"answer": "ok"})
    provider = build_provider(settings(server))  # tool_mode defaults to auto
    try:
        for _ in range(2):
            assert (await provider.complete(request())).text == "ok"
    finally:
        await provider.aclose()
    assert server.props_requests == 1
    assert all("response_format" in r.body and "tools" not in r.body for r in server.requests)


async def test_auto_is_native_on_other_servers_and_asks_again_after_a_server_error(
    server: FakeOpenAI,
) -> None:
    server.props_status = 503  # llama.cpp loading its model: not yet known
    provider = build_provider(settings(server))
    try:
        await provider.complete(request())
        server.props_status = 200  # and now a server that is not llama.cpp (404)
        await provider.complete(request())
        await provider.complete(request())
    finally:
        await provider.aclose()
    assert server.props_requests == 2
    assert all("tools" in r.body and "response_format" not in r.body for r in server.requests)


async def test_native_mode_never_asks(server: FakeOpenAI) -> None:
    server.props = LLAMA_PROPS
    await complete(build_provider(settings(server, tool_mode="native")), request())
    assert server.props_requests == 0
    assert "tools" in server.requests[0].body


async def test_a_tool_the_grammar_cannot_hold_is_left_out_and_noted_once(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    recursive = {
        "type": "object",
        "properties": {"tree": {"$ref": "#"}},
    }
    tools = [READ, ToolSpec("tree_tool", "Walks a tree.", recursive)]
    server.reply = constrained({"answer": "ok"})
    provider = build_provider(settings(server, tool_mode="grammar"))
    with caplog.at_level(logging.WARNING):
        try:
            for _ in range(2):
                await provider.complete(request(tools))
        finally:
            await provider.aclose()
    notes = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert notes == [
        "tool 'tree_tool' is left out of grammar-mode requests: it has a recursive $ref"
    ]
    for sent in server.requests:
        assert "tree_tool" not in json.dumps(sent.body)


async def test_when_no_tool_fits_the_request_offers_none(server: FakeOpenAI) -> None:
    odd = ToolSpec("odd", "Odd.", {"type": "string"})
    server.reply = says('{"tool": "odd", "arguments": {}}')
    reply = await complete(build_provider(settings(server, tool_mode="grammar")), request([odd]))
    body = server.requests[0].body
    assert not {"tools", "response_format"} & set(body)
    assert reply.tool_calls == []  # no tool was offered: nothing is read as a call of one


def test_grammar_is_refused_where_tools_are_native_only() -> None:
    anthropic = ModelSettings.model_validate(
        {"provider": "anthropic", "api_key": "k", "tool_mode": "grammar"}
    )
    with pytest.raises(ValueError, match="MODEL_TOOL_MODE=grammar is for MODEL_PROVIDER=openai"):
        build_provider(anthropic)
    with pytest.raises(AgentDefinitionError, match="grammar is for the openai provider"):
        ModelChoice(provider="anthropic", tool_mode="grammar")
    with pytest.raises(AgentDefinitionError, match="tool_mode must be one of"):
        ModelChoice(tool_mode="json")  # type: ignore[arg-type]


async def test_an_agent_chooses_its_own_tool_mode(server: FakeOpenAI) -> None:
    default = build_provider(settings(server))
    providers = Providers(settings(server), default)
    try:
        assert providers.for_choice(ModelChoice()) is default
        assert providers.for_choice(ModelChoice(tool_mode="auto")) is default
        grammar = providers.for_choice(ModelChoice(tool_mode="grammar"))
        assert grammar is not default
        assert providers.for_choice(ModelChoice(provider="openai", tool_mode="grammar")) is grammar
        server.reply = constrained({"answer": "ok"})
        await grammar.complete(request())
        assert "response_format" in server.requests[-1].body
    finally:
        await providers.aclose()
        await default.aclose()


def test_an_agent_without_a_tool_mode_keeps_its_fingerprint() -> None:
    agent = Agent(name="a", instructions="x", model=ModelChoice(provider="openai", name="m"))
    # The fingerprint this definition had before models had a tool mode.
    assert agent.fingerprint() == "538f35001ff72d9a2e16513aa00e7bd5abd1d1c6e29f552eca2130ef3a4172d5"
    chosen = ModelChoice(provider="openai", name="m", tool_mode="grammar")
    assert Agent(name="a", instructions="x", model=chosen).fingerprint() != agent.fingerprint()


async def _ask_about_a_txt(
    server: FakeOpenAI,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> tuple[str, Any]:
    """A task on the real stack asking what a.txt ("alpha-42") says, the model behind
    `server` in grammar mode: its session id and result."""
    provider = build_provider(settings(server, tool_mode="grammar"))
    try:
        session_id = new_session_id()
        (session_root(workspace, tenant, session_id) / "a.txt").write_text("alpha-42")
        async with agent_worker(provider, workspace, name="m") as queue:
            sid, handle = await start(
                client,
                resources,
                queue,
                "What does a.txt say?",
                tenant=tenant,
                session_id=session_id,
            )
            return sid, await asyncio.wait_for(handle.result(), 60)
    finally:
        await provider.aclose()


async def test_a_task_runs_the_tool_a_constrained_reply_called(
    server: FakeOpenAI,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    server.queued = [
        constrained({"tool": "read_file", "arguments": {"path": "a.txt"}}),
        constrained({"answer": "a.txt says alpha-42."}),
    ]
    sid, result = await _ask_about_a_txt(server, client, resources, agent_worker, workspace, tenant)
    assert result.status == "completed"
    first, second = (r.body for r in server.requests)
    for body in (first, second):
        assert "tools" not in body and body["response_format"]["type"] == "json_schema"
    items = await items_of(resources, tenant, sid)
    [call] = [i for i in items if i.kind == "tool_call"]
    [done] = [i for i in items if i.kind == "tool_result"]
    assert call.tool_name == "read_file"
    assert not (done.data or {}).get("error_type")
    # The model was shown its call as it wrote it, and the file's content as a user turn.
    assert second["messages"][-2] == {
        "role": "assistant",
        "content": '{"tool": "read_file", "arguments": {"path": "a.txt"}}',
    }
    assert second["messages"][-1]["role"] == "user"
    assert "alpha-42" in second["messages"][-1]["content"]
    answers = [i.text for i in items if i.kind == "assistant_message"]
    assert answers[-1] == "a.txt says alpha-42."


async def test_a_task_withholds_the_tool_whose_call_repeated_itself_for_one_reply(
    server: FakeOpenAI,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    read = constrained({"tool": "read_file", "arguments": {"path": "a.txt"}})
    server.queued = [
        read,
        read,  # the same call, the same result: "nothing new"
        constrained({"tool": "list_dir", "arguments": {}}),
        constrained({"answer": "a.txt says alpha-42."}),
    ]
    _, result = await _ask_about_a_txt(server, client, resources, agent_worker, workspace, tenant)
    assert result.status == "completed"

    def tools(body: dict[str, Any]) -> list[str]:
        schema = body["response_format"]["json_schema"]["schema"]["anyOf"]
        return [a["properties"]["tool"]["const"] for a in schema if "tool" in a["properties"]]

    offered = [tools(r.body) for r in server.requests]
    assert "read_file" in offered[0] and "read_file" in offered[1]
    # Withheld from the reply after the repeat only.
    assert "read_file" not in offered[2] and "list_dir" in offered[2]
    assert "read_file" in offered[3]
    assert "Nothing new" in server.requests[2].body["messages"][-1]["content"]
