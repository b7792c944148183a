"""One worker's sessions to its MCP servers: shared by concurrent calls, replaced when the
server goes away, closed (the stdio server exits) when the worker stops."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context.model_context import config_of
from durable_agents.activities.tools.base import Tool, ToolContext, TransientToolError
from durable_agents.activities.tools.mcp_servers import McpHttp, McpListingError
from durable_agents.activities.tools.mcp_toolset import McpToolsets
from durable_agents.storage.context_configs import ContextConfigRepository
from durable_agents.workers.resources import Resources
from tests.support.mcp import free_port, recorded, toolbox_http, toolbox_stdio


def _ctx(key: str) -> ToolContext:
    return ToolContext(idempotency_key=key, workspace=Path("."), tenant_id="t", session_id="s")


def _by_name(toolsets: McpToolsets) -> dict[str, Tool]:
    return {t.spec.name: t for t in toolsets.tools()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): it has exited, its parent has not reaped it yet.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[-1][:1] != "Z"


async def test_concurrent_calls_share_one_stdio_server_and_closing_ends_it(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    async with McpToolsets([toolbox_stdio("box", record)]) as toolsets:
        report = _by_name(toolsets)["box__make_report"]
        outputs = await asyncio.gather(
            *(report.fn(_ctx(f"k{i}"), {"title": f"r{i}", "lines": i}) for i in range(12))
        )
    for i, out in enumerate(outputs):
        assert json.loads(out.content) == {
            "title": f"r{i}",
            "body": [f"line {n}" for n in range(i)],
        }
    calls = recorded(record)
    assert sorted(c["key"] for c in calls) == sorted(f"k{i}" for i in range(12))
    (pid,) = {c["pid"] for c in calls}  # one server process served them all
    assert not _alive(pid)


async def test_an_http_server_gone_is_a_transient_failure_and_a_new_session_follows(
    tmp_path: Path,
) -> None:
    record, port = tmp_path / "record.jsonl", free_port()
    with toolbox_http("web", record, tmp_path / "a.log", port) as web:
        toolsets = McpToolsets([web])
        await toolsets.start()
    try:
        echo = _by_name(toolsets)["web__echo"]
        # Promptly, not after the call timeout: the dead session ends the wait.
        with pytest.raises(TransientToolError) as gone:
            async with asyncio.timeout(20):
                await echo.fn(_ctx("k1"), {"text": "anyone?"})
        # Fixed words (they land in workflow history): no URL, no server text.
        assert str(gone.value).startswith("MCP server web unreachable (")
        assert str(port) not in str(gone.value)
        with toolbox_http("web", record, tmp_path / "b.log", port):
            out = await echo.fn(_ctx("k2"), {"text": "back"})
        assert out.content == b"echo: back"
    finally:
        await toolsets.aclose()
    assert [c["key"] for c in recorded(record)] == ["k2"]


async def test_a_server_that_cannot_be_reached_at_start_fails_it_naming_the_server() -> None:
    toolsets = McpToolsets([McpHttp("nowhere", f"http://127.0.0.1:{free_port()}/mcp")])
    with pytest.raises(McpListingError, match="'nowhere': could not list its tools"):
        await toolsets.start()


async def test_a_call_past_its_timeout_is_transient_and_the_session_serves_on(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    server = toolbox_stdio("box", record, call_timeout_seconds=1)
    async with McpToolsets([server]) as toolsets:
        tools = _by_name(toolsets)
        with pytest.raises(TransientToolError, match=r"^MCP server box timed out"):
            await tools["box__block"].fn(_ctx("k1"), {"token": "slow"})
        await tools["box__echo"].fn(_ctx("k2"), {"text": "still here"})
    # One server process: a slow call does not cost the other calls their session.
    assert len({c["pid"] for c in recorded(record)}) == 1


async def test_a_server_deployed_with_other_tools_changes_the_recorded_turn_config(
    resources: Resources, tmp_path: Path, tenant: str
) -> None:
    """Tools are listed when a worker starts; their specs join the context config a turn
    records, so a worker started against a changed server records a new config."""
    ids = []
    for doc in ("Echo, v1.", "Echo, v2.", "Echo, v1."):
        server = toolbox_stdio("box", tmp_path / "r.jsonl", env={"TOOLBOX_ECHO_DOC": doc})
        async with McpToolsets([server]) as toolsets:
            specs = [t.spec for t in toolsets.tools()]
        config = config_of("scripted", "m", "You help.", specs, ContextBudget())
        async with resources.sessions() as db, db.begin():
            ids.append(await ContextConfigRepository(db, tenant).record(config))
    assert ids[0] == ids[2] != ids[1]


async def test_a_stdio_server_never_gets_the_worker_s_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = ("DATABASE_URL", "S3_SECRET_ACCESS_KEY", "MODEL_API_KEY", "TEMPORAL_API_KEY")
    for name in secrets:
        monkeypatch.setenv(name, "secret")
    async with McpToolsets([toolbox_stdio("box", tmp_path / "r.jsonl")]) as toolsets:
        out = await _by_name(toolsets)["box__environment_names"].fn(_ctx("k"), {})
    names = set(json.loads(out.content)["result"])  # FastMCP wraps a list as {"result": ...}
    assert "MCP_RECORD" in names  # what the declaration gives it does arrive
    assert not names & set(secrets)
