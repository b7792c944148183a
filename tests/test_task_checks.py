"""Completed means checked: a task that declares a check (its start's files and texts, its
agent's command or callable) completes only when the check passes on its answer; a failure
is told to the model, which goes on, until the check allows no more tries (check_failed).
A task without a check completes *unchecked*, and says so."""

from __future__ import annotations

import asyncio
import getpass
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.agents import Agent
from durable_agents.activities.checks.runner import MAX_REASON_CHARS, first_failure
from durable_agents.activities.checks.spec import CallDone, Check, CheckContext, CheckSpecError
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.agent_state import agent_state
from durable_agents.vocabulary.item_marks import CHECK_KEY, CHECK_STANDS_KEY
from durable_agents.vocabulary.session_status import shown_status
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import TaskOptions
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, session_root, start

WRITE = {"name": "write_file", "arguments": {"path": "out/desc.md", "content": "A summary."}}
# write_file asks for approval by default; these tasks are about their checks.
NO_APPROVAL = {"loosened_approvals": {"write_file": "never"}, "loosened_by": "test"}


async def _session(resources: Resources, tenant: str, sid: str) -> Any:
    async with agent_state(resources.sessions, tenant) as st:
        return await st.sessions.get(uuid.UUID(sid))


async def test_a_claim_without_the_work_is_told_to_the_model_and_the_task_completes_checked(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = ScriptedProvider.from_data(
        [
            {"text": "I wrote the description to out/desc.md."},  # no call was made
            {"tool_calls": [WRITE]},
            {"text": "Done: out/desc.md holds it."},
        ]
    )
    check = {"files": ["out/desc.md"], "contains": {"out/desc.md": ["summary"]}}
    async with agent_worker(model, workspace) as queue:
        sid, handle = await start(
            client, resources, queue, tenant=tenant, check=check, **NO_APPROVAL
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.checked) == ("completed", True)
    row = await _session(resources, tenant, sid)
    assert (row.status, row.checked) == ("completed", True)
    assert shown_status(row.status, row.checked) == "completed (checked)"
    told = [i for i in await items_of(resources, tenant, sid) if i.data.get(CHECK_KEY)]
    assert len(told) == 1 and told[0].role == "user"
    assert "out/desc.md does not exist" in told[0].text
    # The reply to the failed check must call a tool; the ones before and after may answer.
    assert [r.call_required for r in model.requests] == [False, True, False]


async def test_the_reply_after_a_call_whose_arguments_were_not_json_must_call_again(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = ScriptedProvider.from_data(
        [
            {"tool_calls": [{"name": "write_file", "arguments": {RAW_ARGUMENTS_KEY: '{"path'}}]},
            {"tool_calls": [WRITE]},
            {"text": "Done: out/desc.md holds it."},
        ]
    )
    check = {"files": ["out/desc.md"]}
    async with agent_worker(model, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant, check=check, **NO_APPROVAL)
        result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.checked) == ("completed", True)
    assert [r.call_required for r in model.requests] == [False, True, False]


async def test_a_check_that_never_passes_ends_the_task_check_failed_with_the_reason(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = ScriptedProvider.from_data([{"tool_calls": [WRITE]}] + [{"text": "Done."}] * 3)
    check = {"contains": {"out/desc.md": ["port 8080"]}, "attempts": 2}
    async with agent_worker(model, workspace) as queue:
        sid, handle = await start(
            client, resources, queue, tenant=tenant, check=check, **NO_APPROVAL
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "check_failed" and not result.checked
    assert (
        result.last_error == "check failed 2 of 2 times: out/desc.md does not contain 'port 8080'"
    )
    row = await _session(resources, tenant, sid)
    assert (row.status, row.checked) == ("check_failed", None)
    items = await items_of(resources, tenant, sid)
    assert sum(1 for i in items if i.data.get(CHECK_KEY)) == 2
    assert items[-1].kind == "error" and "port 8080" in items[-1].text


async def test_a_task_without_a_check_completes_unchecked_and_says_so(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(ScriptedProvider.from_data([{"text": "All done."}]), workspace) as q:
        sid, handle = await start(client, resources, q, tenant=tenant)
        result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.checked) == ("completed", False)
    row = await _session(resources, tenant, sid)
    assert shown_status(row.status, row.checked) == "completed (unchecked)"
    # The model call said there is no check to pass: the loop asked no check activity.
    history = await handle.fetch_history()
    if os.environ.get("RECORD_HISTORIES"):  # replayed by tests/test_replay.py
        (Path(__file__).parent / "histories" / "completed_unchecked.json").write_text(
            history.to_json()
        )
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "call_model" in scheduled and "check_answer" not in scheduled


async def _mentions_each_file(ctx: CheckContext) -> str | None:
    report = (await ctx.read_text("out/report.md") or "").casefold()
    for name in ("alpha.txt", "beta.txt"):
        words = (await ctx.read_text(name) or "").split()
        if not any(w.casefold() in report for w in words if len(w) >= 5):
            return f"the report says nothing of what {name} holds"
    return None


SURVEYOR = Agent(
    "surveyor",
    "Survey the files.",
    tools=builtin_tools(),
    approvals={"write_file": "never"},
    check=Check(command=["test", "-s", "out/report.md"], call=_mentions_each_file),
)


async def _survey(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    model: ScriptedProvider,
) -> tuple[uuid.UUID, Any]:
    """SURVEYOR's task on alpha.txt and beta.txt, driven by `model`: (its id, its result)."""
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    (root / "alpha.txt").write_text("Notes about pelicans")
    (root / "beta.txt").write_text("Notes about lighthouses")
    async with agent_worker(model, workspace, agents=(SURVEYOR,)) as queue:
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, agent="surveyor"
        )
        return sid, await asyncio.wait_for(handle.result(), 60)


@pytest.mark.parametrize(
    ("report", "outcome"),
    [
        ("alpha.txt: mentions pelicans. beta.txt: mentions lighthouses.", "completed"),
        ("Files: alpha.txt, beta.txt.", "check_failed"),  # names alone
    ],
)
async def test_an_agents_command_and_callable_check_read_the_workspace(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    report: str,
    outcome: str,
) -> None:
    write = {"name": "write_file", "arguments": {"path": "out/report.md", "content": report}}
    model = ScriptedProvider.from_data(
        [{"tool_calls": [write]}] + [{"text": "Report written."}] * 3
    )
    _, result = await _survey(client, resources, agent_worker, workspace, tenant, model)
    assert result.status == outcome
    if outcome == "check_failed":
        assert result.last_error is not None
        assert "says nothing of what alpha.txt holds" in result.last_error


async def _says_done(ctx: CheckContext) -> str | None:
    return None if "done" in ctx.answer.casefold() else "the answer does not say it is done"


ANSWER_CHECKER = Agent(
    "answer-checker",
    "Say done.",
    tools=builtin_tools(),
    approvals={"write_file": "never"},
    check=Check(call=_says_done),
)


async def test_a_check_on_the_workspace_alone_holds_the_model_to_calls_until_a_tool_changed_it(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    def write(report: str) -> dict[str, Any]:
        return {"name": "write_file", "arguments": {"path": "out/report.md", "content": report}}

    read = {"name": "read_file", "arguments": {"path": "alpha.txt"}}
    model = ScriptedProvider.from_data(
        [
            {"tool_calls": [write("Files: alpha.txt, beta.txt.")]},
            {"text": "Report written."},
            {"tool_calls": [read]},
            {"tool_calls": [write("Files: alpha.txt, beta.txt.")]},  # the same again
            {"tool_calls": [write("alpha.txt: pelicans. beta.txt: lighthouses.")]},
            {"text": "Report written."},
        ]
    )
    sid, result = await _survey(client, resources, agent_worker, workspace, tenant, model)
    assert (result.status, result.checked) == ("completed", True)
    # After the failed check: a call, then calls until a write changed the report (one
    # that wrote what it held changed nothing); then it may answer.
    assert [r.call_required for r in model.requests] == [False, False, True, True, True, False]
    items = await items_of(resources, tenant, str(sid))
    wrote = [i for i in items if i.kind == "tool_result" and i.tool_name == "write_file"]
    assert [w.data.get("unchanged") for w in wrote] == [None, True, None]
    (failed,) = [i for i in items if i.data.get(CHECK_KEY)]
    assert failed.data[CHECK_STANDS_KEY] is True
    assert "The check reads the files, not your answer" in failed.text


async def test_a_check_that_reads_the_answer_lets_the_model_answer_again_after_one_call(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    read = {"name": "list_dir", "arguments": {"path": "."}}
    model = ScriptedProvider.from_data(
        [{"text": "Hello."}, {"tool_calls": [read]}, {"text": "Done."}]
    )
    async with agent_worker(model, workspace, agents=(ANSWER_CHECKER,)) as queue:
        sid, handle = await start(client, resources, queue, tenant=tenant, agent="answer-checker")
        result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.checked) == ("completed", True)
    assert [r.call_required for r in model.requests] == [False, True, False]
    (failed,) = [i for i in await items_of(resources, tenant, sid) if i.data.get(CHECK_KEY)]
    assert CHECK_STANDS_KEY not in failed.data


@pytest.mark.parametrize(
    ("tool_user", "words"),
    [
        # The worker's own user may enter the workspace: the command runs and fails.
        (getpass.getuser(), "the check's command exited 1"),
        # As root, the tools' user (nobody) may not: a reason that says so, never a pass.
        (
            None,
            "the check's command cannot run in the workspace as 'nobody' (AGENT_TOOL_USER)",
        ),
    ],
)
async def test_a_missing_file_fails_the_agents_command_check(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tool_user: str | None,
    words: str,
) -> None:
    if tool_user is None and os.geteuid() != 0:
        pytest.skip("runs as root only: the tools' user is the worker's own otherwise")
    model = ScriptedProvider.from_data([{"text": "Done."}] * 3)
    async with agent_worker(
        model, workspace, agents=(SURVEYOR,), agent_settings={"tool_user": tool_user}
    ) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant, agent="surveyor")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "check_failed"
    assert result.last_error is not None
    assert result.last_error.startswith(f"check failed 3 of 3 times: {words}")


@pytest.mark.parametrize(
    ("check", "words"),
    [
        ({"command": ["rm", "-rf", "/"]}, "a command or a callable is declared on the agent"),
        ({"files": "out/x.md"}, "check.files must be a list of paths"),
        ({"files": ["x"] * 17}, "a check names at most 16 files"),
        ({"contains": {"a.md": "text"}}, "check.contains must map a path to a list of texts"),
        ({"files": ["a\x00b"]}, "a check's path contains a control character"),
        ({"files": ["a"], "attempts": 0}, "check.attempts must be a whole number 1-10"),
        ({"files": ["a"], "attempts": True}, "check.attempts must be a whole number 1-10"),
        ({}, "a check names files, contains, a command or a call"),
        ({"files": ["a"], "shell": "x"}, "shell is not a field of a check"),
    ],
)
def test_a_starts_check_is_data_only_and_bounded(check: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidTaskInput, match=words.replace("(", r"\(").replace(")", r"\)")):
        TaskOptions(check=check)


def test_a_start_cannot_hand_in_a_check_with_code() -> None:
    async def anything(_: CheckContext) -> None:
        return None

    with pytest.raises(CheckSpecError, match="declared on the agent"):
        Check.from_start(Check(call=anything))
    kept = TaskOptions(check={"files": ["out/a.md"]}).check
    assert kept == {"files": ["out/a.md"], "contains": {}, "attempts": 3}


async def test_a_callables_reason_is_one_printable_line_bounded_for_the_history(
    tmp_path: Path,
) -> None:
    async def wordy(_: CheckContext) -> str:
        return "first line\nsecond\x1b[31m " + "word " * 200

    found = await first_failure([Check(call=wordy)], tmp_path, "", None)
    assert found is not None and found.workspace_only
    assert len(found.reason) == MAX_REASON_CHARS and found.reason.endswith("...")
    assert found.reason.startswith("first line second [31m word word")


SEEN: list[list[CallDone]] = []


async def _records_calls(ctx: CheckContext) -> str | None:
    SEEN.append(list(ctx.calls))
    return None


CALL_READER = Agent(
    "call-reader", "Read alpha.txt.", tools=builtin_tools(), check=Check(call=_records_calls)
)


async def test_a_callable_check_sees_the_tasks_calls_that_returned_without_an_error(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "alpha.txt").write_text("Notes about pelicans")
    reads = [
        {"name": "read_file", "arguments": {"path": "alpha.txt"}},
        {"name": "read_file", "arguments": {"path": "missing.txt"}},  # an error result
    ]
    listing = {"name": "list_dir", "arguments": {}}
    model = ScriptedProvider.from_data(
        [{"tool_calls": reads}, {"tool_calls": [listing]}, {"text": "Done."}]
    )
    SEEN.clear()
    async with agent_worker(model, workspace, agents=(CALL_READER,)) as queue:
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, agent="call-reader"
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    (seen,) = SEEN  # one answer, checked once
    assert seen == [CallDone("read_file", {"path": "alpha.txt"}), CallDone("list_dir", {})]


async def test_a_check_that_read_the_calls_does_not_hold_the_model_to_a_changed_workspace(
    tmp_path: Path,
) -> None:
    # Its failure can clear with a call that changes no file (a read), so another answer
    # after one must be checked again.
    async def wants_a_read(ctx: CheckContext) -> str | None:
        return None if ctx.calls else "read a file first"

    async def wants_a_file(ctx: CheckContext) -> str | None:
        return None if await ctx.read_text("out.txt") else "write out.txt"

    read_first = await first_failure([Check(call=wants_a_read)], tmp_path, "", None)
    file_first = await first_failure([Check(call=wants_a_file)], tmp_path, "", None)
    assert read_first is not None and not read_first.workspace_only
    assert file_first is not None and file_first.workspace_only
    assert (
        await first_failure(
            [Check(call=wants_a_read)], tmp_path, "", None, [CallDone("read_file", {"path": "a"})]
        )
        is None
    )
