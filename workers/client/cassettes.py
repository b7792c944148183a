"""A recorded session as a file (a cassette), and a regression test of an agent from it.

    await export_cassette(client, session_id, "tests/cassettes/survey.json")   # once
    await assert_replays(client, "tests/cassettes/survey.json")                # in a test

A cassette holds what a replay needs of a session: its task, and per model step the reply
(text, calls, the fingerprint of the request it answered) and each call's result (its
stored content, or its error). `assert_replays` writes it back as an ended session of the
client's tenant, replays that with the agent as the workers serve it now
(workers/client/replays.py), and fails naming the first step where the agent's trajectory
parts from the cassette's, and why. The agent's requests must be the recorded ones for its
replies to be served: run it with the same instructions, tools and model name.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from temporalio.client import Client, WorkflowFailureError

from durable_agents.activities.context.call_ids import PROVIDER_ID_KEY
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.storage.replays import MISS_KEY, SERVED_KEY
from durable_agents.storage.tool_results import ToolResult, VerifiedArtifact, commit_tool_result
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.previews import ERROR_PREFIX
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.replays import ReplayReport, ReplayRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.resources import Resources

FORMAT = "durable-agents-cassette/1"
# What a reply's data keeps beyond these goes into the cassette as it is (its finish reason,
# model, usage and request fingerprint); these are the step's own or a replay's.
_NOT_KEPT = frozenset({"step", "tool_calls", "context", SERVED_KEY, MISS_KEY})


class Connection(Protocol):
    """What the helpers use of a client (durable_agents.AgentClient has it all)."""

    temporal: Client
    resources: Resources
    service: TaskService
    caller: Caller


async def export_cassette(client: Connection, session_id: str, path: Path | str) -> Path:
    """Write session `session_id` (of the client's tenant) to `path` as a cassette."""
    tenant, res = client.caller.tenant_id, client.resources
    row, items = await tasks.read_session(res.sessions, tenant, session_id, store=res.store)
    contents = await _contents(client, [i for i in items if i.artifact_id is not None])
    task = next((i for i in items if i.kind == ItemKind.USER_MESSAGE), None)
    if task is None:
        raise ValueError(f"session {row.id} has no task to export")
    by_call = {i.tool_call_id: i for i in items if i.kind == ItemKind.TOOL_CALL}
    results = {i.tool_call_id: i for i in items if i.kind == ItemKind.TOOL_RESULT}
    steps = []
    for reply in (i for i in items if i.kind == ItemKind.ASSISTANT_MESSAGE):
        calls = []
        for entry in reply.data.get("tool_calls", []):
            call, done = by_call.get(entry["id"]), results.get(entry["id"])
            if call is None:
                continue
            calls.append(
                {
                    "id": call.tool_call_id,
                    "name": call.tool_name,
                    "arguments": call.data.get("arguments", {}),
                    "provider_id": call.data.get(PROVIDER_ID_KEY),
                    "tokens": call.tokens,
                    "result": None if done is None else _result(done, contents),
                }
            )
        steps.append(
            {"step": reply.data.get("step"), "text": reply.text, "tokens": reply.tokens}
            | {k: v for k, v in reply.data.items() if k not in _NOT_KEPT}
            | {"calls": calls}
        )
    text = contents[task.artifact_id].decode() if task.artifact_id in contents else task.text
    cassette = {
        "format": FORMAT,
        "agent": row.agent_definition,
        "task": text,
        "task_tokens": task.tokens,
        "steps": steps,
    }
    target = Path(path)
    body = json.dumps(cassette, indent=1, ensure_ascii=False) + "\n"
    await asyncio.to_thread(target.write_text, body)
    return target


async def load_cassette(client: Connection, path: Path | str) -> str:
    """Write the cassette at `path` as an ended session of the client's tenant; its id."""
    cassette = json.loads(await asyncio.to_thread(Path(path).read_text))
    if not isinstance(cassette, dict) or cassette.get("format") != FORMAT:
        raise ValueError(f"{path} is no cassette ({FORMAT})")
    tenant, res = client.caller.tenant_id, client.resources
    # Upload and verify first; the items then commit in one transaction.
    refs: dict[tuple[int, str], tuple[ArtifactRef, bytes]] = {}
    for step in cassette["steps"]:
        for call in step["calls"]:
            content = _content_of(call.get("result"))
            if content is not None:
                kind = call["result"]["content_type"]
                ref = await res.store.put(tenant, content, kind)
                refs[(step["step"], call["id"])] = (ref, content)
    sid = uuid.uuid4()
    task = str(cassette["task"])
    async with agent_state(res.sessions, tenant, write=True) as st:
        await st.sessions.create(
            sid, title=task[:200], model_config={}, agent_definition=cassette["agent"]
        )
        tokens = int(cassette.get("task_tokens", 0))
        await st.items.append(
            NewItem(sid, ItemKind.USER_MESSAGE, "user", f"{sid}:task", task, tokens=tokens)
        )
        for step in cassette["steps"]:
            n, key = step["step"], f"{sid}:{step['step']}"
            await st.items.append_many(_step_items(sid, key, step))
            for c in step["calls"]:
                if c["result"] is not None:
                    result = _tool_result(sid, n, c, key, refs.get((n, c["id"])))
                    await commit_tool_result(st.db, tenant, result, store=res.store)
        await st.sessions.set_status(sid, SessionStatus.COMPLETED)
    return str(sid)


async def assert_replays(
    client: Connection,
    cassette: Path | str,
    *,
    agent: str | None = None,
    live: Sequence[str] = (),
    **options: Any,
) -> ReplayReport:
    """Replay the cassette with `agent` (default: the cassette's) on the client's workers;
    AssertionError naming the first divergence, if the replay parts from the cassette.
    `live`: tools run live; `options`: start options, as `fork` takes. The report."""
    recorded = await load_cassette(client, cassette)
    request = ReplayRequest(recorded, agent, list(live), dict(options))
    replay = await client.service.replay(client.caller, request)
    # A failed run is a report too: AgentState says how it ended.
    with contextlib.suppress(WorkflowFailureError):
        await tasks.task_handle(client.temporal, replay).result()
    report = await client.service.replay_report(client.caller, replay)
    if report.divergence is not None:
        raise AssertionError(
            f"replay {replay} of {cassette} diverged at {report.divergence}; its first live "
            f"reply: step {report.first_live} ({report.first_live_why or 'request'} differed)"
        )
    return report


async def _contents(client: Connection, items: list[ItemRow]) -> dict[uuid.UUID, bytes]:
    tenant, res = client.caller.tenant_id, client.resources
    ids = [i.artifact_id for i in items if i.artifact_id is not None]
    async with agent_state(res.sessions, tenant) as st:
        rows = await st.artifacts.get_many(ids)
    found = {}
    for artifact_id, row in rows.items():
        ref = res.store.ref_for(tenant, row.sha256, row.size_bytes, row.content_type)
        found[artifact_id] = await res.store.get(tenant, ref)
    return found


def _result(item: ItemRow, contents: dict[uuid.UUID, bytes]) -> dict[str, Any]:
    result: dict[str, Any] = {"error_type": item.data.get("error_type"), "text": item.text}
    if item.artifact_id is not None and item.artifact_id in contents:
        content = contents[item.artifact_id]
        result["content_type"] = item.data["artifact"]["content_type"]
        try:
            result["content"] = content.decode("utf-8")
        except UnicodeDecodeError:
            result["base64"] = base64.b64encode(content).decode()
    return result


def _step_items(sid: uuid.UUID, key: str, step: dict[str, Any]) -> list[NewItem]:
    """A step's reply and its calls, as the loop wrote them."""
    calls = step["calls"]
    data = {k: v for k, v in step.items() if k not in ("step", "text", "tokens", "calls")}
    data |= {
        "step": step["step"],
        "tool_calls": [{"id": c["id"], "name": c["name"]} for c in calls],
    }
    items = [
        NewItem(
            sid,
            ItemKind.ASSISTANT_MESSAGE,
            "assistant",
            f"{key}:model",
            str(step["text"]),
            data=data,
            tokens=int(step["tokens"]),
        )
    ]
    for c in calls:
        items.append(
            NewItem(
                sid,
                ItemKind.TOOL_CALL,
                "assistant",
                f"{key}:{c['id']}:call",
                str(c["name"]),
                tool_call_id=c["id"],
                tool_name=c["name"],
                data={
                    "arguments": c["arguments"],
                    "step": step["step"],
                    PROVIDER_ID_KEY: c["provider_id"],
                },
                tokens=int(c["tokens"]),
            )
        )
    return items


def _content_of(result: dict[str, Any] | None) -> bytes | None:
    if result is None:
        return None
    if "content" in result:
        return str(result["content"]).encode("utf-8")
    if "base64" in result:
        return base64.b64decode(result["base64"])
    return None


def _tool_result(
    sid: uuid.UUID,
    step: int,
    call: dict[str, Any],
    key: str,
    stored: tuple[ArtifactRef, bytes] | None,
) -> ToolResult:
    result = call["result"]
    error_type = result.get("error_type")
    words = str(result.get("text", ""))
    if error_type:
        words = words.removeprefix(f"{ERROR_PREFIX}{error_type}): ")
    return ToolResult(
        session_id=sid,
        tool_call_id=call["id"],
        tool_name=call["name"],
        step=step,
        idempotency_key=f"{key}:{call['id']}",
        artifact=None if stored is None else VerifiedArtifact(*stored),
        error_type=error_type,
        error=words,
    )
