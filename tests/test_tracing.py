"""Trajectory spans on the real stack: one `chat` span per model call and one `execute_tool`
span per tool call even though every workflow task replays (max_cached_workflows=0), all
under the run's `invoke_agent` span, GenAI attributes set, and content only by reference:
no attribute holds the task or the file read, and the refs resolve to objects that do."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
from temporalio.worker import Replayer

from durable_agents.activities.providers.scripted import ScriptedProvider, ScriptedTurn
from durable_agents.activities.trajectory import (
    AgentTracingPlugin,
    PayloadRef,
    TrajectoryRecorder,
    payload_refs,
)
from durable_agents.storage.models import ArtifactRefRow, ArtifactRow
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.agent import AgentWorkflow
from tests.support import verbs
from tests.support.helpers import items_of, session_root, start, wait_for_pending
from tests.support.trajectory import Otel, named, parent_of, traced_worker, waiting
from tests.test_replay import recorded_workflow_id

TASK_MARK = "TASK-MARK-4e1f9a"
FILE_MARK = "FILE-MARK-b07c2d"
HISTORIES = Path(__file__).parent / "histories"


@pytest.fixture
def otel() -> Iterator[Otel]:
    yield Otel()


async def test_spans_once_each_under_invoke_agent_and_content_only_by_reference(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    otel: Otel,
) -> None:
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "notes.txt").write_text(f"meeting notes\n{FILE_MARK}\n")
    provider = ScriptedProvider([ScriptedTurn("Reading.", [("read_file", {"path": "notes.txt"})])])
    recorder = TrajectoryRecorder(
        tracer=otel.tracer, meter=otel.meter, store=resources.store, sessions=resources.sessions
    )
    # The caller's client carries the interceptor too: the run joins the caller's trace.
    config = client.config()
    config["interceptors"] = [OpenTelemetryInterceptor(add_temporal_spans=True)]
    traced = Client(**config)
    async with traced_worker(client, resources, migrated, workspace, provider, recorder) as queue:
        session_id, handle = await start(
            traced,
            resources,
            queue,
            f"Summarise notes.txt {TASK_MARK}",
            tenant=tenant,
            session_id=sid,
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    spans = list(otel.spans.get_finished_spans())
    model = migrated.settings(workspace=workspace, task_queue="x", provider="scripted").model.name

    # Once each, although every workflow task replayed the history from the start.
    chats = named(spans, f"chat {model}")
    tools = named(spans, "execute_tool read_file")
    (invoke,) = named(spans, "invoke_agent AgentWorkflow")
    assert len(chats) == 2 and len(tools) == 1
    assert len(named(spans, "RunWorkflow:AgentWorkflow")) == 1
    assert len(named(spans, "StartActivity:call_model")) == 2
    assert len(named(spans, "StartActivity:run_tool")) == 1
    assert len({s.context.span_id for s in spans}) == len(spans)

    # One tree: caller -> invoke_agent -> StartActivity -> RunActivity -> chat / execute_tool.
    (caller,) = named(spans, "StartWorkflow:AgentWorkflow")
    assert parent_of(invoke, spans) is caller
    for leaf, activity in [(c, "call_model") for c in chats] + [(tools[0], "run_tool")]:
        run = parent_of(leaf, spans)
        assert run.name == f"RunActivity:{activity}"
        scheduled = parent_of(run, spans)
        assert scheduled.name == f"StartActivity:{activity}"
        assert parent_of(scheduled, spans) is invoke
    assert {s.context.trace_id for s in spans} == {caller.context.trace_id}
    assert invoke.end_time is not None and invoke.start_time is not None
    assert invoke.end_time > invoke.start_time  # the whole run, not a zero-length marker

    attrs: dict[str, Any]
    for span in chats + tools + [invoke]:
        attrs = dict(span.attributes or {})
        assert attrs["gen_ai.conversation.id"] == attrs["agent.session.id"] == session_id
        assert attrs["agent.tenant.id"] == tenant
    first, second = sorted(chats, key=lambda s: int(str((s.attributes or {})["agent.step"])))
    for span, reason in ((first, "tool_calls"), (second, "stop")):
        attrs = dict(span.attributes or {})
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "scripted"
        assert attrs["gen_ai.request.model"] == model
        assert tuple(attrs["gen_ai.response.finish_reasons"]) == (reason,)
        assert isinstance(attrs["gen_ai.usage.input_tokens"], int)
        assert isinstance(attrs["gen_ai.usage.output_tokens"], int)
    tool = dict(tools[0].attributes or {})
    assert tool["gen_ai.tool.name"] == "read_file" and tool["gen_ai.tool.call.id"] == "call_0_0"
    assert tool["agent.step"] == 0 and dict(second.attributes or {})["agent.step"] == 1
    assert dict(invoke.attributes or {})["gen_ai.operation.name"] == "invoke_agent"

    # Nothing anywhere in the trajectory holds the content.
    for span in spans:
        values = [span.name, *map(str, (span.attributes or {}).values())]
        values += [str(v) for e in span.events for v in (e.attributes or {}).values()]
        assert not [v for v in values if TASK_MARK in v or FILE_MARK in v], span.name

    # ...but the refs resolve to objects that do.
    async def content(ref: PayloadRef) -> str:
        sha = ref.sha256
        async with resources.sessions() as db:
            row = await db.scalar(
                select(ArtifactRow).where(
                    ArtifactRow.tenant_id == tenant, ArtifactRow.sha256 == sha
                )
            )
        assert row is not None, f"{ref} is not a registered artifact"
        store = resources.store
        ref_ = store.ref_for(tenant, sha, row.size_bytes, row.content_type)
        # The span names the object by URI, with the digest and size beside it.
        assert (ref.uri, ref.size_bytes) == (store.uri(ref_), row.size_bytes)
        return (await store.get(tenant, ref_)).decode()

    second_refs = payload_refs(dict(second.attributes or {}))
    assert set(second_refs) == {"input", "output"}
    sent = await content(second_refs["input"])
    assert TASK_MARK in sent and FILE_MARK in sent  # the expanded tool result went in
    assert "Done." in await content(second_refs["output"])
    assert TASK_MARK in await content(payload_refs(dict(first.attributes or {}))["input"])
    assert FILE_MARK in await content(payload_refs(tool)["tool_result"])

    # Held for the trajectory only, with an expiry: never required to resume.
    async with resources.sessions() as db:
        held = list(
            await db.scalars(
                select(ArtifactRefRow).where(
                    ArtifactRefRow.tenant_id == tenant, ArtifactRefRow.owner_type == "trajectory"
                )
            )
        )
    owners = {str(dict(s.attributes or {})["agent.event.id"]) for s in chats + tools}
    assert {r.owner_id for r in held} == owners
    soon = datetime.now(UTC) + timedelta(days=29)
    assert all(not r.required_for_resume and r.expires_at and r.expires_at > soon for r in held)

    # Metrics: latency and tokens by model, tool latency by tool.
    assert sum(p.count for p in otel.points("gen_ai.client.operation.duration")) == 2
    tokens = {p.attributes["gen_ai.token.type"] for p in otel.points("agent.model.tokens")}
    assert tokens == {"input", "output"}
    # The GenAI convention's histogram: a point per reply and token type.
    usage = otel.points("gen_ai.client.token.usage")
    assert {p.attributes["gen_ai.token.type"] for p in usage} == {"input", "output"}
    assert all(p.count == 2 and p.attributes["gen_ai.system"] == "scripted" for p in usage)
    (tool_latency,) = otel.points("gen_ai.execute_tool.duration")
    assert tool_latency.count == 1 and tool_latency.attributes["gen_ai.tool.name"] == "read_file"


async def test_approvals_waiting_gauge_and_tool_errors(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    otel: Otel,
) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn("", [("read_file", {"path": "missing.txt"})]),
            ScriptedTurn("", [("write_file", {"path": "out.md", "content": "x"})]),
        ]
    )
    recorder = TrajectoryRecorder(tracer=otel.tracer, meter=otel.meter, sessions=resources.sessions)
    async with traced_worker(client, resources, migrated, workspace, provider, recorder) as queue:
        session_id, handle = await start(client, resources, queue, "write it", tenant=tenant)
        (call_id,) = await wait_for_pending(client, session_id)
        assert await waiting(otel, 1) == 1  # the status write may still be in flight
        await verbs.approve(
            client, session_id, call_id, "test", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    assert await waiting(otel, 0) == 0
    (errors,) = otel.points("agent.tool.errors")
    assert errors.value == 1 and errors.attributes["gen_ai.tool.name"] == "read_file"
    spans = list(otel.spans.get_finished_spans())
    (failed,) = named(spans, "execute_tool read_file")
    assert not failed.status.is_ok and "error.type" in (failed.attributes or {})
    # Started without a traced client: the run's own span is the root of one trace.
    (invoke,) = named(spans, "invoke_agent AgentWorkflow")
    assert invoke.parent is None
    assert {s.context.trace_id for s in spans} == {invoke.context.trace_id}
    assert len(named(spans, "RunWorkflow:AgentWorkflow")) == 1


async def test_recorded_histories_replay_with_the_interceptors_and_emit_nothing(
    otel: Otel,
) -> None:
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[AgentTracingPlugin()])
    files = sorted(HISTORIES.glob("*.json"))
    assert files
    for path in files:
        text = path.read_text()
        history = WorkflowHistory.from_json(recorded_workflow_id(path, text), text)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
    assert otel.spans.get_finished_spans() == ()


class BrokenStore:
    """An object store that is down: every upload fails. It still names its objects, as
    ArtifactStore.uri does without asking the server."""

    async def put(self, *args: object, **kwargs: object) -> None:
        raise ConnectionError("object store unreachable")

    def uri(self, ref: ArtifactRef) -> str:
        return f"s3://down/{ref.key}"


async def test_telemetry_failures_never_fail_the_task(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    otel: Otel,
) -> None:
    provider = ScriptedProvider([ScriptedTurn("", [("list_dir", {"path": "."})])])
    recorder = TrajectoryRecorder(
        tracer=otel.tracer,
        store=BrokenStore(),  # type: ignore[arg-type]
        sessions=resources.sessions,
    )
    async with traced_worker(client, resources, migrated, workspace, provider, recorder) as queue:
        session_id, handle = await start(client, resources, queue, "look around", tenant=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
        history = await handle.fetch_history()
    chats = [s for s in otel.spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 2
    assert all(not payload_refs(dict(s.attributes or {})) for s in chats)
    # Nor the tool call: it committed its result at its first attempt.
    (result,) = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    assert "error_type" not in result.data, result.data
    assert not [e for e in history.events if e.HasField("activity_task_failed_event_attributes")]
