"""A gateway-mode device runs each offered call locally under the effects contract: an
effectful call offered again (its first device went away mid-call) is reconciled from the
workspace, never blindly run twice, and reported in doubt when it cannot tell."""

from __future__ import annotations

import json
from pathlib import Path

from durable_agents.activities.agents import DEFAULT_AGENT
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.fetch_policy import PUBLIC_ONLY
from durable_agents.workers.device.calls import LocalResult, LocalTools


def _tools(workspace: Path) -> LocalTools:
    return LocalTools({DEFAULT_AGENT: default_registry()}, workspace, PUBLIC_ONLY, 1024)


async def _write(tools: LocalTools, content: str, *, offered_before: bool) -> LocalResult:
    return await tools.run(
        tool_name="write_file",
        arguments={"path": "out/a.txt", "content": content},
        agent=DEFAULT_AGENT,
        idempotency_key="wf:3:call_3_0",
        tenant_id="t1",
        offered_before=offered_before,
    )


async def test_an_effectful_call_offered_again_is_reconciled_not_rewritten(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    first = await _write(tools, "hello", offered_before=False)
    assert first.effect == "completed" and first.output is not None
    target = tmp_path / "out" / "a.txt"
    before = target.stat()

    again = await _write(tools, "hello", offered_before=True)
    assert again.effect == "reconciled" and again.output is not None
    assert json.loads(again.output.content)["already_applied"] is True
    after = target.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    target.write_text("edited since")
    doubt = await _write(tools, "hello", offered_before=True)
    assert doubt.effect == "in_doubt" and doubt.error_type == "EffectInDoubt"
    assert target.read_text() == "edited since"


async def test_unknown_tools_other_agents_and_oversized_arguments_are_error_results(
    tmp_path: Path,
) -> None:
    tools = _tools(tmp_path)
    unknown = await tools.run(
        tool_name="rm_rf",
        arguments={},
        agent=DEFAULT_AGENT,
        idempotency_key="k",
        tenant_id="t1",
        offered_before=False,
    )
    assert unknown.error_type == "UnknownTool" and "read_file" in unknown.error
    other_agent = await tools.run(
        tool_name="read_file",
        arguments={"path": "a"},
        agent="not-served-here",
        idempotency_key="k",
        tenant_id="t1",
        offered_before=False,
    )
    assert other_agent.error_type == "UnknownAgent"
    big = await _write(tools, "x" * 4096, offered_before=False)
    assert big.error_type == "ArgumentsTooLarge" and big.output is None
    assert not (tmp_path / "out").exists()
