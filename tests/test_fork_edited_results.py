"""`fork --result`: a fork's model reads an edited text in place of a result of the step
before its own, and shares the rest. The edited result stands where the original stood
(the fork carries what its parent committed after it, naming the same objects); the parent
is not changed; every door refuses an edit it cannot make the same way, writing nothing."""

from __future__ import annotations

import asyncio
import io
import random
import re
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.client import Client

from durable_agents.activities.policies.text_limits import TextTooLarge
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.forks import NotForkable
from durable_agents.storage.models import ArtifactRefRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.cli.fork import edited_results
from durable_agents.workers.client import tasks
from durable_agents.workers.client.forks import ForkRequest
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.effect_tools import bump_tool, executions
from tests.support.gateway import bearer, gateway_http, make_key
from tests.support.helpers import agentctl, s3_keys, start
from tests.test_fork_lineage import World, rows_of

EDITED = "The file says: nothing to bump."
TWO_BUMPS = {
    "tool_calls": [
        {"name": "bump", "arguments": {"label": "a"}},
        {"name": "bump", "arguments": {"label": "b"}},
    ]
}


async def test_the_fork_reads_the_edited_result_in_its_place_and_shares_the_rest(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
) -> None:
    counted = tmp_path / "bumps"
    registry = ToolRegistry.of([*builtin_tools(), bump_tool(counted)])
    model = ScriptedProvider.from_data([TWO_BUMPS, {"text": "done"}])
    async with agent_worker(model, workspace, registry=registry) as queue:
        parent, handle = await start(client, resources, queue, "Bump twice.", tenant=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
        before = await rows_of(resources, tenant, uuid.UUID(parent))
        _, theirs = await tasks.read_session(resources.sessions, tenant, parent)
        # The two calls ran side by side: edit the result that committed first, so the
        # other is carried by the fork.
        edited, kept = [i for i in theirs if i.kind == ItemKind.TOOL_RESULT]
        asked_before = len(model.requests)

        request = ForkRequest(
            parent,
            1,
            options={"task_queue": queue},
            results={edited.tool_call_id or "": EDITED},
        )
        service = verbs.service(client, resources.sessions, resources.store)
        fork = await service.fork(verbs.operator(tenant), request)
        forked = await asyncio.wait_for(tasks.task_handle(client, fork).result(), 60)

    assert forked.status == "completed"
    assert await rows_of(resources, tenant, uuid.UUID(parent)) == before
    row, items = await tasks.read_session(resources.sessions, tenant, fork)
    assert row.forked_at == edited.ordinal - 1
    own = [i for i in items if i.ordinal > edited.ordinal - 1]
    assert [i.session_id for i in own] == [uuid.UUID(fork)] * len(own)
    mine, carried = own[0], own[1]
    assert (mine.kind, mine.tool_call_id, mine.tool_name) == (
        ItemKind.TOOL_RESULT,
        edited.tool_call_id,
        "bump",
    )
    assert (mine.text, mine.data, mine.artifact_id) == (EDITED, {"step": 0, "edited": True}, None)
    # The other result is the fork's own row naming the same object (nothing copied in
    # S3), which the fork now holds a reference on too.
    assert (carried.tool_call_id, carried.text, carried.data, carried.artifact_id) == (
        kept.tool_call_id,
        kept.text,
        kept.data,
        kept.artifact_id,
    )
    async with resources.sessions() as db:
        held = await db.scalar(
            select(ArtifactRefRow.required_for_resume).where(
                ArtifactRefRow.tenant_id == tenant,
                ArtifactRefRow.artifact_id == kept.artifact_id,
                ArtifactRefRow.owner_id == fork,
            )
        )
    assert held is True
    results = [i.tool_call_id or "" for i in items if i.kind == ItemKind.TOOL_RESULT]
    assert sorted(results) == ["call_0_0", "call_0_1"]

    # What the fork's model read at step 1: one result per call, the edited text in place
    # of the original, the other call's result as the parent committed it.
    sent = model.requests[asked_before].messages
    tool_messages = [m.content for m in sent if m.role == "tool"]
    assert len(tool_messages) == 2
    assert any(EDITED in m for m in tool_messages)
    assert not any(f"agent-{parent}:0:{edited.tool_call_id}" in m for m in tool_messages)
    assert any(f"agent-{parent}:0:{kept.tool_call_id}" in m for m in tool_messages)
    assert set(executions(counted)) == {f"agent-{parent}:0:call_0_0", f"agent-{parent}:0:call_0_1"}


async def test_every_door_refuses_an_edit_it_cannot_make_and_writes_nothing(
    migrated: StackEndpoints,
    client: Client,
    resources: Resources,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    world = World(resources, tenant, random.Random(5))
    parent = str(await world.task())
    before = await rows_of(resources, tenant, uuid.UUID(parent))
    objects = await s3_keys(resources, f"{resources.store.prefix}/{tenant}/")
    service = verbs.service(client, resources.sessions, resources.store)
    owner = await make_key(resources, tenant, "start")
    path = tmp_path / "result.txt"

    async def refused(results: dict[str, str], error: type[Exception], status: int) -> str:
        """The words of each door's refusal of a fork at step 1 with `results`: the same."""
        with pytest.raises(error) as raised:
            await service.fork(verbs.operator(tenant), ForkRequest(parent, 1, results=results))
        words = str(raised.value)
        for call, text in results.items():
            path.write_text(text)
            code, _, err = await agentctl(
                capsys, "fork", parent, "--at", "1", "--result", f"{call}={path}"
            )
            assert (code, err) == (1, f"error: {words}\n")
        async with gateway_http(migrated, resources, client) as http:
            answer = await http.post(
                f"/v1/sessions/{parent}/fork",
                json={"at": 1, "results": results},
                headers=bearer(owner),
            )
        assert (answer.status_code, answer.json()["error"]["message"]) == (status, words)
        return words

    # A call of another step, and one the session never made: the step's calls are named.
    # A long text is refused before it is uploaded: no object is left behind.
    long = "x" * 100_000
    for call in ("call_1_0", "call_9_9"):
        words = await refused({call: long}, NotForkable, 409)
        assert words == (
            f"step 1 of session {parent} reads no result of {call}: it reads the results of "
            "step 0's calls call_0_0"
        )
    with pytest.raises(NotForkable, match="reads no tool result to edit \\(it is the task's"):
        await service.fork(verbs.operator(tenant), ForkRequest(parent, 0, results={"c": "x"}))
    words = await refused({"call_0_0": " \n"}, ValueError, 400)
    assert words == "results: the edited result of call_0_0 is empty"
    too_long = "x" * (1024 * 1024 + 1)
    with pytest.raises(TextTooLarge, match="call_0_0: 1048577 bytes is over the limit"):
        await service.fork(
            verbs.operator(tenant), ForkRequest(parent, 1, results={"call_0_0": too_long})
        )

    # A file that is not UTF-8 text is refused by agentctl before it asks.
    path.write_bytes(b"caf\xe9")
    code, _, err = await agentctl(
        capsys, "fork", parent, "--at", "1", "--result", f"call_0_0={path}"
    )
    assert (code, err) == (1, f"error: --result call_0_0: {path} is not UTF-8 text (at byte 3)\n")

    assert await rows_of(resources, tenant, uuid.UUID(parent)) == before
    assert await s3_keys(resources, f"{resources.store.prefix}/{tenant}/") == objects
    async with agent_state(resources.sessions, tenant) as st:
        assert await st.sessions.forks(uuid.UUID(parent)) == []


def test_agentctl_reads_each_result_from_its_file_or_standard_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "result.txt"
    path.write_text("from a file ✓")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from standard input")))
    assert edited_results([f"call_1_0={path}", "call_1_1=-"]) == {
        "call_1_0": "from a file ✓",
        "call_1_1": "from standard input",
    }
    missing = tmp_path / "missing.txt"
    for pairs, words in (
        (["call_1_0"], "--result wants CALL=FILE (FILE a path, or - for standard input)"),
        ([f"call_1_0={path}", f"call_1_0={path}"], "--result call_1_0 is given twice"),
        ([f"call_1_0={missing}"], f"--result call_1_0: cannot read {missing}: No such file"),
    ):
        with pytest.raises(ValueError, match=re.escape(words)):
            edited_results(pairs)
