"""Bad input from the model, run end to end on the chaos stack: malformed tool-call JSON,
an unknown tool, tool output over the configured limits and a model that never stops.
Each becomes a clear error in AgentState; nothing committed before it is lost.

Already covered elsewhere, so not repeated here: unknown and second approval decisions
(tests/test_approvals.py), the step limit's failed status (tests/test_loop_lifecycle.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.fetch_policy import FetchAllowlist
from durable_agents.workers.resources import Resources
from tests.chaos.conftest import ChaosRunner
from tests.support import verbs
from tests.support.chaos import Audit, audit_runs, summarise
from tests.support.helpers import start, tenant_root, wait_for_pending

FETCH_LIMIT = 1000


class _Big(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b"x" * (FETCH_LIMIT * 4)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def big_page() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Big)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/big"
    finally:
        server.shutdown()
        server.server_close()


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _results(audit: Audit, session_id: str) -> dict[str, Any]:
    return {i.tool_call_id: i for i in audit.items[session_id] if i.kind == "tool_result"}


def _assert_intact(audit: Audit) -> None:
    assert audit.duplicates == [] and audit.unanswered == [] and audit.dangling == []


async def test_malformed_tool_call_json_becomes_an_error_result_and_the_run_continues(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_worker: ChaosRunner,
    tmp_path: Path,
    tenant: str,
) -> None:
    (tenant_root(tmp_path, tenant) / "notes.txt").write_text("kept\n")
    provider = ScriptedProvider.from_data(
        [
            _call("read_file", {"path": "notes.txt"}),
            # What the OpenAI and Anthropic providers produce for unparseable arguments.
            _call("read_file", {"_raw": "{not json"}),
            _call("write_file", {"_raw": '{"path": "out/x.md", "content": '}),
            _call("read_file", {"path": "notes.txt", "max_bytes": 2}),
        ]
    )
    began = time.monotonic()
    async with chaos_worker(provider, tmp_path, workspace_scope="tenant") as queue:
        session_id, handle = await start(
            chaos_client,
            chaos_resources,
            queue,
            tenant=tenant,
            loosened_approvals={"write_file": "never"},
            loosened_by="test",
        )
        result = await asyncio.wait_for(handle.result(), 60)
    audit = await audit_runs(chaos_resources, tenant, [session_id], [result.status])
    summarise("malformed_json", audit, time.monotonic() - began)

    assert result.status == "completed"
    results = _results(audit, session_id)
    for call in ("call_1_0", "call_2_0"):
        assert results[call].data["error_type"] == "InvalidArguments"
        assert "not valid JSON" in results[call].text
    assert not (tenant_root(tmp_path, tenant) / "out").exists(), (
        "a garbled write_file must write nothing"
    )
    # The model was told, and the calls before and after it kept their results.
    told = {m.tool_call_id: m.content for m in provider.requests[3].messages if m.role == "tool"}
    assert "not valid JSON" in told["call_1_0"] and "not valid JSON" in told["call_2_0"]
    # ...with what it sent and what to send instead: the tool by name, its arguments' shape.
    assert 'You sent: {"path": "out/x.md", "content": ' in told["call_2_0"]
    shape = '{"path": string (required), "content": string (required)}'
    assert (
        f"Call write_file again now, with its arguments as one complete JSON object: {shape}"
        in (told["call_2_0"])
    )
    assert results["call_0_0"].data["artifact"]["size_bytes"] == len("kept\n")
    assert results["call_3_0"].data["artifact"]["size_bytes"] == 2
    _assert_intact(audit)
    assert audit.refs >= 2


async def test_unknown_tool_is_answered_with_an_error_and_never_waits_for_approval(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_worker: ChaosRunner,
    tmp_path: Path,
    tenant: str,
) -> None:
    provider = ScriptedProvider.from_data(
        [_call("rm_rf", {"path": "/"}), _call("write_file", {"path": "ok.md", "content": "ok"})]
    )
    began = time.monotonic()
    async with chaos_worker(provider, tmp_path, workspace_scope="tenant") as queue:
        session_id, handle = await start(chaos_client, chaos_resources, queue, tenant=tenant)
        assert await wait_for_pending(chaos_client, session_id) == ["call_1_0"]
        # The unknown tool's call never waited for a decision, so there is none to give.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await verbs.approve(
                chaos_client,
                session_id,
                "call_0_0",
                "alice",
                sessions=chaos_resources.sessions,
                tenant_id=tenant,
            )
        await verbs.approve(
            chaos_client,
            session_id,
            "call_1_0",
            "alice",
            sessions=chaos_resources.sessions,
            tenant_id=tenant,
        )
        result = await asyncio.wait_for(handle.result(), 60)
    audit = await audit_runs(chaos_resources, tenant, [session_id], [result.status])
    summarise("unknown_tool", audit, time.monotonic() - began)

    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "UnknownToolCall"
    assert "call_1_0" in cause.message, "the refusal names the call that is waiting"
    assert result.status == "completed"
    results = _results(audit, session_id)
    assert results["call_0_0"].data["error_type"] == "UnknownTool"
    assert "there is no tool named 'rm_rf'" in results["call_0_0"].text
    assert (tenant_root(tmp_path, tenant) / "ok.md").read_text() == "ok"
    approvals = [
        i.tool_call_id
        for i in audit.items[session_id]
        if i.kind == "approval" and "approved" in i.data
    ]
    assert approvals == ["call_1_0"]
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) == 1, "an unknown tool is not retried"
    _assert_intact(audit)


async def test_fetch_over_the_size_limit_is_a_clear_error_not_a_retry_or_a_partial_body(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_worker: ChaosRunner,
    tmp_path: Path,
    tenant: str,
    big_page: str,
) -> None:
    (tenant_root(tmp_path, tenant) / "big.txt").write_text("y" * (FETCH_LIMIT * 4))
    provider = ScriptedProvider.from_data(
        [_call("fetch_url", {"url": big_page}), _call("read_file", {"path": "big.txt"})]
    )
    began = time.monotonic()
    # The page is served on loopback, which only an operator's allowlist opens to fetch_url.
    loopback = FetchAllowlist.parse("127.0.0.1")
    scope = {"fetch_max_bytes": FETCH_LIMIT, "fetch_allow": loopback, "workspace_scope": "tenant"}
    async with chaos_worker(provider, tmp_path, **scope) as queue:
        session_id, handle = await start(chaos_client, chaos_resources, queue, tenant=tenant)
        result = await asyncio.wait_for(handle.result(), 60)
    audit = await audit_runs(chaos_resources, tenant, [session_id], [result.status])
    summarise("output_over_limit", audit, time.monotonic() - began)

    assert result.status == "completed"
    results = _results(audit, session_id)
    too_big = results["call_0_0"]
    assert too_big.data["error_type"] == "ResponseTooLarge"
    assert too_big.artifact_id is None and "artifact" not in too_big.data
    # The limit is fetch's: a workspace file of the same size is read whole.
    assert results["call_1_0"].data["artifact"]["size_bytes"] == FETCH_LIMIT * 4
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) == 1, "an oversized response is final, not retried"
    _assert_intact(audit)


async def test_step_limit_fails_the_run_but_keeps_every_effect_and_result_committed(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_worker: ChaosRunner,
    tmp_path: Path,
    tenant: str,
) -> None:
    endless = [_call("write_file", {"path": f"out/{n}.md", "content": f"{n}\n"}) for n in range(20)]
    provider = ScriptedProvider.from_data(endless)
    began = time.monotonic()
    async with chaos_worker(provider, tmp_path, workspace_scope="tenant") as queue:
        session_id, handle = await start(
            chaos_client,
            chaos_resources,
            queue,
            tenant=tenant,
            max_steps=4,
            loosened_approvals={"write_file": "never"},
            loosened_by="test",
        )
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 60)
    audit = await audit_runs(chaos_resources, tenant, [session_id], ["failed: StepLimit"])
    summarise("step_limit", audit, time.monotonic() - began)

    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "StepLimit"
    items = audit.items[session_id]
    error = items[-1]
    assert error.kind == "error" and error.text == "step limit of 4 reached"
    assert error.idempotency_key.endswith(":status:StepLimit")
    # Four steps ran: their writes happened once each and their results are all there.
    assert sorted(p.name for p in (tenant_root(tmp_path, tenant) / "out").iterdir()) == [
        f"{n}.md" for n in range(4)
    ]
    assert len(_results(audit, session_id)) == 4
    assert audit.refs == 4
    _assert_intact(audit)
