"""agentctl against the real stack: the commands a user types, and their errors."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.decision_requests import DecisionRequestRow
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from tests.conftest import AgentRunner
from tests.support.helpers import agentctl, committed_rows, start, tenant_root


async def test_start_status_approve_watch_and_fetch_an_artifact(
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tenant: str,
) -> None:
    (tenant_root(workspace, tenant) / "a.txt").write_text("alpha")
    provider = ScriptedProvider.from_data(
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}
                ]
            },
        ]
    )
    async with agent_worker(provider, workspace, workspace_scope="tenant") as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        get_settings.cache_clear()
        code, out, _ = await agentctl(capsys, "start", "copy a to b")
        assert code == 0
        session = out.strip()
        uuid.UUID(session)

        async with asyncio.timeout(20):
            while "waiting for approval" not in out:
                code, out, _ = await agentctl(capsys, "status", session)
                await asyncio.sleep(0.1)
        assert "write_file" in out and "'path': 'b.txt'" in out
        call = re.search(r"waiting for approval: (\S+)", out).group(1)  # type: ignore[union-attr]

        code, out, err = await agentctl(capsys, "approve", session, "call_9_9")
        assert code == 1 and "no tool call 'call_9_9' is waiting" in err
        code, out, _ = await agentctl(capsys, "approve", session, call)
        assert (code, out.strip()) == (0, f"approved {call}")

        code, out, _ = await agentctl(capsys, "watch", session)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("#1") and "copy a to b" in lines[0]
    assert lines[-1] == "task ended: completed (unchecked)"
    artifact_line = next(line for line in lines if "read_file" in line and "artifact" in line)
    assert "result" in artifact_line

    code, out, _ = await agentctl(capsys, "show", session)
    assert code == 0 and f"session {session}" in out and "completed" in out
    turn_row = next(line for line in out.splitlines() if line.startswith("│ 1 "))
    assert "scripted" in turn_row  # the turn's recorded provider and model
    assert "artifacts in this page" in out
    code, out, _ = await agentctl(capsys, "show", session, "--after", "3", "--limit", "2")
    assert f"more items: agentctl show {session} --after 5" in out
    assert "│   4 │" in out and "│   6 │" not in out

    code, out, _ = await agentctl(capsys, "sessions")
    assert code == 0 and session in out

    # Cold tier: archive it, read it anyway (rehydrates), restoring again is a no-op.
    code, out, _ = await agentctl(capsys, "archive", "session", session)
    assert code == 0 and out.startswith("archived:")
    code, out, _ = await agentctl(capsys, "show", session)
    assert code == 0 and "completed" in out and "│   4 │" in out
    code, out, _ = await agentctl(capsys, "archive", "restore", session)
    assert code == 0 and out.startswith("already hot")

    code, out, _ = await agentctl(capsys, "watch", session, "--after", "3")
    assert out.splitlines()[0].startswith("#4 ")


async def test_artifacts_get_returns_the_verified_bytes(
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    resources: object,
    tenant: str,
) -> None:
    from tests.support.helpers import items_of

    (tenant_root(workspace, tenant) / "a.txt").write_bytes(b"alpha bytes")
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}]
    )
    async with agent_worker(provider, workspace, workspace_scope="tenant") as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        get_settings.cache_clear()
        code, out, _ = await agentctl(capsys, "start", "read a", "--watch")
    session = out.splitlines()[0].strip()
    result = next(
        i
        for i in await items_of(resources, tenant, session)  # type: ignore[arg-type]
        if i.kind == "tool_result"
    )
    target = tmp_path / "a.out"
    code, out, _ = await agentctl(
        capsys, "artifacts", "get", str(result.artifact_id), "-o", str(target)
    )
    assert code == 0 and target.read_bytes() == b"alpha bytes"

    sha = result.data["artifact"]["sha256"]
    code, out, _ = await agentctl(capsys, "artifacts", "get", sha[:12])
    assert code == 0 and out == "alpha bytes"
    code, _, err = await agentctl(
        capsys, "artifacts", "get", str(result.artifact_id), "--tenant", "someone-else"
    )
    assert code == 1 and "not found" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["status", "not-a-uuid"], "not a session id"),
        (["status", str(uuid.UUID(int=0))], "not found"),
        (["start", "   "], "the task text is empty"),
        (["send", str(uuid.UUID(int=0)), "hi"], "not found"),
    ],
)
async def test_bad_input_gets_a_clear_error_and_exit_code_1(
    cli_env: None, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = await agentctl(capsys, *args)
    assert code == 1
    assert message in err.lower()
    assert "Traceback" not in err


async def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = await agentctl(capsys, "--bogus")
    assert code == 2 and "No such option" in err


async def _staged_requests(res: Resources, tenant: str) -> int:
    async with res.sessions() as db:
        stmt = select(func.count()).where(DecisionRequestRow.tenant_id == tenant)
        return int(await db.scalar(stmt) or 0)


async def test_a_verb_on_an_ended_task_says_it_is_not_running_and_records_nothing(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    tenant: str,
) -> None:
    async with agent_worker(ScriptedProvider.from_data([{"text": "done"}]), workspace) as queue:
        sid, handle = await start(client, resources, queue, tenant=tenant)
        await asyncio.wait_for(handle.result(), 60)
    before = await committed_rows(resources, tenant)
    for args in (
        ["send", sid, "hi"],
        ["approve", sid, "call_0_0"],
        ["reject", sid, "call_0_0"],
        ["budget", "raise", sid, "--tokens", "1000"],
    ):
        code, out, err = await agentctl(capsys, *args)
        assert (code, out, err) == (1, "", f"error: task {sid} is not running (completed)\n")
    code, out, _ = await agentctl(capsys, "cancel", sid)
    assert (code, out.strip()) == (0, f"{sid} had already ended")
    code, _, err = await agentctl(capsys, "resume", sid)
    assert (code, err.strip()) == (
        1,
        f"error: task {sid} is completed; only a failed or cancelled task resumes",
    )
    assert await committed_rows(resources, tenant) == before
    assert await _staged_requests(resources, tenant) == 0
