"""A stuck loop stops: the same failing call (tool and arguments) N times, or N replies in
a row without progress, end the task `stuck` with the reason, N from the task's settings
(`stuck_after`) or its agent's Limits, instead of spending every step it has left."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from dataclasses import replace
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.agents import Agent, Limits
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.repeated_calls import (
    EarlierCall,
    repeat_output,
    repeated,
    repeated_note,
)
from durable_agents.activities.tools.base import ToolOutput
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.vocabulary.item_marks import REPEATS_KEY
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import TaskOptions
from durable_agents.workflows.progress import Progress
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, session_root, start


def _read(path: str, **more: object) -> dict[str, object]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": path, **more}}]}


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
    # Each read a success: the 0.5B model read one file 14 times and ran to its step limit,
    # then, told so of the call just before, went round a few reads.
    others = [f"o{n}.txt" for n in range(4)]
    # Told so, it read the same file again with another max_bytes: the same result.
    script = [_read(p) for p in ["here.txt"] * 2 + ["other.txt"]]
    script += [_read("here.txt", max_bytes=10**9), *[_read(p) for p in others], _read("here.txt")]
    # A call of another tool between two reads: the read after it is no repeat, unless
    # that call changed nothing (the same write again).
    write = {
        "tool_calls": [{"name": "write_file", "arguments": {"path": "out/r.md", "content": "x"}}]
    }
    script += [write, _read("here.txt"), write, *[_read("here.txt")] * 10, {"text": "done"}]
    model = ScriptedProvider.from_data(script)
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    for name in ["here.txt", "other.txt", *others]:
        root.joinpath(name).write_text("found" if name == "here.txt" else name)
    never = {"loosened_approvals": {"write_file": "never"}, "loosened_by": "test"}
    async with agent_worker(model, workspace) as queue:
        _, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            session_id=sid,
            stuck_after=3,
            **never,  # type: ignore[arg-type]
        )
        result = await asyncio.wait_for(handle.result(), 60)
    # A read with the same tool and result as one of the reads just before it is no
    # progress: a note when it is the call just before, its content again when further back.
    assert (result.status, result.steps) == ("stuck", 14)
    assert result.last_error == "stuck: 3 replies in a row made no progress"
    results = [i for i in await items_of(resources, tenant, str(sid)) if i.kind == "tool_result"]
    assert [r.tool_name for r in results].count("write_file") == 2
    assert [bool(r.data.get("unchanged")) for r in results if r.tool_name == "write_file"] == [
        False,
        True,
    ]
    reads = [r for r in results if r.tool_name == "read_file"]
    repeats = [False, True, False, True] + [False] * 4 + [True, False, True, True]
    assert [bool(r.data.get("unchanged")) for r in reads] == repeats
    found = hashlib.sha256(b"found").hexdigest()
    said = repeated_note(EarlierCall("read_file", {"path": "here.txt"}, found, 1))
    note = hashlib.sha256(said.encode()).hexdigest()
    assert [r.data.get(REPEATS_KEY) for r in reads] == [found if r else None for r in repeats]
    shas = [r.data["artifact"]["sha256"] for r in reads if r.data.get("unchanged")]
    assert shas == [note, found, found, found, note]


def test_a_repeat_is_the_same_tool_and_result_and_its_note_names_the_call_it_repeats() -> None:
    found = hashlib.sha256(b"found").hexdigest()
    read = EarlierCall("read_file", {"path": "a.txt"}, found, 1)
    listed = EarlierCall("list_dir", {"path": "."}, found, 2)
    assert repeated([listed, read], "read_file", b"found") == read
    assert repeated([listed, read], "read_file", b"other") is None
    assert repeated([listed], "read_file", b"found") is None
    assert repeat_output(ToolOutput(b"found"), read) == ToolOutput(
        repeated_note(read).encode(), changed=False
    )
    further = replace(read, back=2)
    assert repeat_output(ToolOutput(b"found"), further) == ToolOutput(b"found", changed=False)
    assert repeated_note(read).startswith(
        'Nothing new: this result is the same as that of your call read_file {"path": "a.txt"},'
    )
    long = repeated_note(EarlierCall("search_files", {"pattern": "x" * 500}, found, 1))
    assert '"xxx' in long and "x" * 200 not in long and "…" in long


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
