"""A stuck loop stops: the same failing call (tool and arguments) N times, or N replies in
a row without progress, end the task `stuck` with the reason, N from the task's settings
(`stuck_after`) or its agent's Limits, instead of spending every step it has left."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.agents import Agent, Limits
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.repeated_calls import REPEATED_NOTE
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.vocabulary.item_marks import REPEATS_KEY
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import TaskOptions
from durable_agents.workflows.progress import Progress
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, session_root, start


def _read(path: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}


async def test_the_same_failing_call_made_again_and_again_ends_the_task_stuck(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = ScriptedProvider.from_data([_read("missing.txt")] * 10 + [{"text": "done"}])
    async with agent_worker(model, workspace) as queue:
        sid, handle = await start(client, resources, queue, tenant=tenant, stuck_after=3)
        result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.steps) == ("stuck", 3)
    assert result.last_error == "stuck: the same failing call was made 3 times"
    items = await items_of(resources, tenant, sid)
    assert sum(1 for i in items if i.kind == "tool_result") == 3  # not 10
    assert items[-1].kind == "error" and items[-1].text == result.last_error


async def test_replies_that_only_fail_end_the_task_stuck_and_a_success_resets_the_count(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    # Every call another missing file: never the same call, never progress but once.
    script = [_read("a1"), _read("a2"), _read("here.txt"), _read("b1"), _read("b2"), _read("b3")]
    model = ScriptedProvider.from_data([*script, {"text": "done"}])
    capped = Agent("capped", "Read.", tools=builtin_tools(), limits=Limits(stuck_after=3))
    sid = uuid.uuid4()
    session_root(workspace, tenant, sid).joinpath("here.txt").write_text("found")
    async with agent_worker(model, workspace, agents=(capped,)) as queue:
        # As the service starts it: the agent's Limits are the task's settings.
        options = TaskOptions.for_agent(capped, tenant_id=tenant, task_queue=queue)
        assert options.stuck_after == 3
        handle = await tasks.start_task(
            client, resources.sessions, "Read.", options, session_id=sid
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.steps) == ("stuck", 6)
    assert result.last_error == "stuck: 3 replies in a row made no progress"


async def test_writing_what_the_file_already_holds_again_and_again_ends_the_task_stuck(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    write = {"name": "write_file", "arguments": {"path": "out/r.md", "content": "same"}}
    model = ScriptedProvider.from_data([{"tool_calls": [write]}] * 10 + [{"text": "done"}])
    never = {"loosened_approvals": {"write_file": "never"}, "loosened_by": "test"}
    async with agent_worker(model, workspace) as queue:
        sid, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            stuck_after=3,
            **never,  # type: ignore[arg-type]
        )
        result = await asyncio.wait_for(handle.result(), 60)
    # The first write changed the file; the next three changed nothing.
    assert (result.status, result.steps) == ("stuck", 4)
    assert result.last_error == "stuck: 3 replies in a row made no progress"
    wrote = [i for i in await items_of(resources, tenant, sid) if i.kind == "tool_result"]
    assert [bool(w.data.get("unchanged")) for w in wrote] == [False, True, True, True]


async def test_reading_the_same_file_again_and_again_ends_the_task_stuck(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    # Each read a success: the 0.5B model read one file 14 times and ran to its step limit.
    script = [_read("here.txt")] * 2 + [_read("other.txt")] + [_read("here.txt")] * 10
    model = ScriptedProvider.from_data([*script, {"text": "done"}])
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    root.joinpath("here.txt").write_text("found")
    root.joinpath("other.txt").write_text("other")
    async with agent_worker(model, workspace) as queue:
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, stuck_after=3
        )
        result = await asyncio.wait_for(handle.result(), 60)
    # A read repeating the call just before it, result and all, is a note and no progress;
    # one after another call is a read like any other.
    assert (result.status, result.steps) == ("stuck", 7)
    assert result.last_error == "stuck: 3 replies in a row made no progress"
    reads = [i for i in await items_of(resources, tenant, str(sid)) if i.kind == "tool_result"]
    assert [bool(r.data.get("unchanged")) for r in reads] == [False, True, False] + [False] + [
        True
    ] * 3
    found = hashlib.sha256(b"found").hexdigest()
    note = hashlib.sha256(REPEATED_NOTE.encode()).hexdigest()
    assert [r.data.get(REPEATS_KEY) for r in reads] == [None, found, None, None] + [found] * 3
    assert [r.data["artifact"]["sha256"] for r in reads if r.data.get("unchanged")] == [note] * 4


def test_progress_counts_replies_and_repeats() -> None:
    p = Progress()
    p.reply()
    p.call_ended(failed=True, repeats=1)
    p.call_ended(failed=False, repeats=0)  # one call of the reply succeeded
    p.calls_done()
    assert (p.idle_replies, p.stuck(2)) == (0, None)
    p.idle()
    p.reply()
    p.call_ended(failed=True, repeats=1)
    p.calls_done()
    assert p.stuck(2) == "stuck: 2 replies in a row made no progress"
    assert p.stuck(3) is None
    assert Progress(repeats=2).stuck(2) == "stuck: the same failing call was made 2 times"


def test_a_reply_whose_calls_changed_nothing_is_no_progress() -> None:
    p = Progress()
    for _ in range(2):
        p.reply()
        p.call_ended(failed=False, repeats=0, unchanged=True)  # wrote what the file held
        p.calls_done()
    assert p.stuck(2) == "stuck: 2 replies in a row made no progress"
    p.reply()
    p.call_ended(failed=False, repeats=0, unchanged=True)
    p.call_ended(failed=False, repeats=0)  # a read beside it succeeded
    p.calls_done()
    assert (p.idle_replies, p.stuck(2)) == (0, None)
