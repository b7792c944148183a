"""edit_file through the real stack: one exact-text change to an existing file, asked about
first; a text that is missing or not unique is an error result and the file is untouched;
a call retried under its key applies its edit once."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import ToolContext
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.file_edits import EXCERPT_CHARS, edit_file, excerpt
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.blocking import artifact_commit_held, wait_until_commit_blocked
from tests.support.helpers import items_of, session_root, start, wait_for_pending
from tests.support.tool_calls import approved, claim, ledger_state, new_call, result_of, run

CONFIG = "[server]\nhost = 0.0.0.0\nport = 80\nworkers = 4\nlog = info\n"
PORT = {"path": "app.ini", "old_text": "port = 80", "new_text": "port = 9090"}


def _calls(*arguments: dict[str, str]) -> ScriptedProvider:
    return ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "edit_file", "arguments": a} for a in arguments]}]
    )


def _told(provider: ScriptedProvider) -> dict[str, str]:
    """What the model read back for each call, in its next request."""
    messages = provider.requests[1].messages
    return {m.tool_call_id or "": m.content for m in messages if m.role == "tool"}


async def test_changing_one_port_in_a_five_line_config_changes_that_line_alone(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    config = session_root(workspace, tenant, sid) / "app.ini"
    config.write_text(CONFIG)
    async with agent_worker(_calls(PORT), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        # The file exists: changing it asks a person first, and nothing changed meanwhile.
        assert await wait_for_pending(client, session_id) == ["call_0_0"]
        assert config.read_text() == CONFIG
        await verbs.approve(
            client, session_id, "call_0_0", "alice", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    before, after = CONFIG.splitlines(keepends=True), config.read_text().splitlines(keepends=True)
    assert len(after) == len(before) == 5
    assert [n for n in range(5) if before[n] != after[n]] == [2]
    assert after[2] == "port = 9090\n"
    results = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert len(results) == 1 and results[0].data.get("error_type") is None
    told = json.loads(results[0].text)
    assert told["line"] == 3 and told["already_applied"] is False
    # The model is shown the change as the file now reads, two lines around it.
    assert told["now_reads"] == "".join(after).rstrip("\n")


async def test_a_missing_or_repeated_text_is_an_error_and_the_file_is_untouched(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    config = session_root(workspace, tenant, sid) / "app.ini"
    config.write_text(CONFIG)
    first = os.stat(config)
    provider = _calls(
        {"path": "app.ini", "old_text": "port = 8080", "new_text": "port = 1"},
        {"path": "app.ini", "old_text": " = ", "new_text": ": "},
        {"path": "app.ini", "old_text": "PORT  = 80", "new_text": "port = 1"},
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            session_id=sid,
            loosened_approvals={"edit_file": "never"},
            loosened_by="test",
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert config.read_text() == CONFIG
    after = os.stat(config)
    assert (after.st_ino, after.st_mtime_ns) == (first.st_ino, first.st_mtime_ns), "rewritten"
    told = _told(provider)
    assert "is not in 'app.ini'" in told["call_0_0"] and "nothing was changed" in told["call_0_0"]
    assert "occurs 4 times" in told["call_0_1"] and "lines 2, 3, 4, 5" in told["call_0_1"]
    assert "matches line 3 only if case and spacing are ignored" in told["call_0_2"]
    # Short and bounded: line numbers, never the file's text.
    assert all(len(text) < 400 and "0.0.0.0" not in text for text in told.values())
    errors = {
        i.tool_call_id: i.data.get("error_type")
        for i in await items_of(resources, tenant, session_id)
        if i.kind == "tool_result"
    }
    assert errors == {
        "call_0_0": "TextNotFound",
        "call_0_1": "TextNotUnique",
        "call_0_2": "TextNotFound",
    }


async def _edit_result_sha(scratch: Path, arguments: dict[str, str]) -> str:
    """The sha256 of what edit_file returns when it first applies `arguments` to CONFIG:
    the artifact a test holds back to pause the call between its edit and its commit."""
    await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
    (scratch / arguments["path"]).write_text(CONFIG)
    ctx = ToolContext(idempotency_key="probe", workspace=scratch, tenant_id="t", session_id="s")
    return hashlib.sha256((await edit_file(ctx, arguments)).content).hexdigest()


async def test_an_edit_retried_after_it_landed_is_applied_once(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    first_sha = await _edit_result_sha(tmp_path / "scratch", PORT)
    sid = uuid.uuid4()
    config = session_root(workspace, tenant, sid) / "app.ini"
    config.write_text(CONFIG)
    async with agent_worker(_calls(PORT), workspace) as queue:
        # Attempt 1 edits the file, uploads its result, then cannot commit: it times out.
        async with artifact_commit_held(resources, tenant, first_sha):
            session_id, handle = await start(
                client,
                resources,
                queue,
                tenant=tenant,
                session_id=sid,
                tool_timeout_seconds=3,
                loosened_approvals={"edit_file": "never"},
                loosened_by="test",
            )
            await wait_until_commit_blocked(resources)
            edited = os.stat(config)
            result = await asyncio.wait_for(handle.result(), 60)
        after = os.stat(config)

    assert result.status == "completed"
    assert config.read_text() == CONFIG.replace("port = 80", "port = 9090")
    assert (after.st_ino, after.st_mtime_ns) == (edited.st_ino, edited.st_mtime_ns), "edited twice"
    results = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert len(results) == 1 and results[0].data["effect"] == "reconciled"
    assert json.loads(results[0].text)["already_applied"] is True


def _acts(res: Resources, root: Path) -> ToolActivities:
    return ToolActivities(res.sessions, res.store, default_registry(), workspace=root)


async def test_a_second_run_under_the_key_returns_the_committed_result(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    # The old text is gone after the first run: running again would be an error (or, for
    # "80" -> "8080", a second edit). The committed result is what the key returns.
    grow = {"path": "app.ini", "old_text": "port = 80", "new_text": "port = 8080"}
    (tmp_path / "app.ini").write_text(CONFIG)
    inp = await new_call(resources, tenant, "edit_file", grow)
    await approved(resources, inp)
    acts = _acts(resources, tmp_path)
    first = await run(acts, inp)
    again = await run(acts, inp)
    assert (again.item_id, again.error_type) == (first.item_id, None)
    assert (tmp_path / "app.ini").read_text() == CONFIG.replace("port = 80", "port = 8080")


async def test_an_interrupted_edit_whose_new_text_holds_the_old_is_in_doubt_not_redone(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    # "port = 8080" holds "port = 80": the file reads the same before and after the edit.
    grow = {"path": "app.ini", "old_text": "port = 80", "new_text": "port = 8080"}
    (tmp_path / "app.ini").write_text(CONFIG.replace("port = 80", "port = 8080"))
    inp = await new_call(resources, tenant, "edit_file", grow)
    await approved(resources, inp)
    await claim(resources, inp)
    outcome = await run(_acts(resources, tmp_path), inp)
    assert outcome.in_doubt
    assert (tmp_path / "app.ini").read_text() == CONFIG.replace("port = 80", "port = 8080")
    assert await ledger_state(resources, inp) == ("in_doubt", 2)


async def test_an_interrupted_edit_that_never_landed_runs(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    (tmp_path / "app.ini").write_text(CONFIG)
    inp = await new_call(resources, tenant, "edit_file", PORT)
    await approved(resources, inp)
    await claim(resources, inp)
    outcome = await run(_acts(resources, tmp_path), inp)
    assert not outcome.in_doubt and outcome.error_type is None
    assert (tmp_path / "app.ini").read_text() == CONFIG.replace("port = 80", "port = 9090")
    result = await result_of(resources, inp)
    assert json.loads(result["text"])["already_applied"] is False
    assert await ledger_state(resources, inp) == ("completed", 2)


async def test_an_edit_to_the_same_text_changes_nothing_and_says_it_is_so(tmp_path: Path) -> None:
    """old_text equal to new_text, present once: the file already says it, so the result is
    success with already_applied (nothing for the model to fix) and the file is not
    rewritten."""
    config = tmp_path / "app.ini"
    config.write_text(CONFIG)
    first = os.stat(config)
    ctx = ToolContext(idempotency_key="same", workspace=tmp_path, tenant_id="t", session_id="s")
    same = {"path": "app.ini", "old_text": "port = 80", "new_text": "port = 80"}

    done = await edit_file(ctx, same)
    told = json.loads(done.content)

    assert told["already_applied"] is True and told["line"] == 3
    assert told["unchanged"] is True and not done.changed
    after = os.stat(config)
    assert config.read_text() == CONFIG
    assert (after.st_ino, after.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)


def test_the_result_shows_the_edited_lines_and_two_around_them_within_a_bound() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 11))
    assert excerpt(text, 1, 1) == "line 1\nline 2\nline 3"
    assert excerpt(text, 5, 2) == "\n".join(f"line {n}" for n in range(3, 9))
    assert excerpt(text, 10, 1) == "line 8\nline 9\nline 10"
    long = excerpt("x" * 5_000 + "\n", 1, 1)
    assert len(long) == EXCERPT_CHARS and long.endswith("…")
