"""`compare`: two sessions of a tenant side by side. Two tasks read the same first file and
then another one each: every door (the service, agentctl, its --json, the gateway, the
Python API) shows the same steps, marks step 1 as where the second parts from the first
(other arguments: path), says the first step's results are the same content, and gives
each session's status, check, tokens, cost and final answer. A refused comparison (one
session, too many, one named twice, another tenant's) says why in one line and reads
nothing it should not."""

from __future__ import annotations

import asyncio
import json
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents import AgentClient
from durable_agents.activities.policies.pricing import Price
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.errors import SessionNotFound
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.comparison import (
    DIFFERENT,
    MAX_SESSIONS,
    OK,
    PASSED,
    SAME,
    Comparison,
    check_outcome,
)
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.gateway import bearer, gateway_http, make_key
from tests.support.helpers import agentctl, start, tenant_root

FIRST = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "b.txt"}}]},
    {"text": "A and B are read."},
]
SECOND = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "c.txt"}}]},
    {"text": "A and C are read."},
]
PRICES = {"scripted/*": Price(input=Decimal(2), output=Decimal(8))}
PARTS = "step 1: other arguments (read_file: path)"


async def _two_sessions(
    client: Client, resources: Resources, queue: str, tenant: str
) -> tuple[str, str]:
    done = []
    for text in ("Read a and b.", "Read a and c."):
        sid, handle = await start(client, resources, queue, text, tenant=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
        done.append(sid)
    return done[0], done[1]


def _check_comparison(found: Comparison, first: str, second: str) -> None:
    one, two = found.sessions
    assert [str(s.session_id) for s in found.sessions] == [first, second]
    assert (one.divergence, str(two.divergence)) == (None, PARTS)
    assert [(s.status, s.shown, s.check, s.steps) for s in found.sessions] == [
        ("completed", "completed (unchecked)", None, 3)
    ] * 2
    assert (one.answer, two.answer) == ("A and B are read.", "A and C are read.")
    assert all(s.tokens > 0 and s.cost_usd is not None and s.cost_usd > 0 for s in found.sessions)
    assert [r.step for r in found.steps] == [0, 1, 2]
    step0, step1, step2 = (row.sessions for row in found.steps)
    # The first read: the same call, the same content; nothing marked.
    assert step0[1] is not None and step0[1].calls[0].other_keys == ()
    assert (step0[1].calls[0].outcome, step0[1].calls[0].content) == (OK, SAME)
    # The second: the key that differs (never its value), the other content, the mark.
    assert step1[0] is not None and step1[1] is not None
    assert (step1[0].calls[0].content, step1[0].diverged) == (None, False)
    mine = step1[1].calls[0]
    assert (mine.name, mine.other_keys, mine.content) == ("read_file", ("path",), DIFFERENT)
    assert step1[1].diverged
    assert step2[1] is not None and (step2[1].answered, step2[1].answer) == (True, DIFFERENT)
    for view in (v for row in found.steps for v in row.sessions):
        assert view is not None and view.input_tokens > 0 and view.cost_usd is not None
        assert view.seconds is not None and 0 <= view.seconds < 60


async def test_two_sessions_side_by_side_at_every_door(
    migrated: StackEndpoints,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("a", "b", "c"):
        (tenant_root(workspace, tenant) / f"{name}.txt").write_text(f"file {name}\n")
    model = ScriptedProvider.from_data(FIRST, by_task={"Read a and c": SECOND})
    worker = agent_worker(model, workspace, workspace_scope="tenant", prices=PRICES)
    async with worker as queue:
        first, second = await _two_sessions(client, resources, queue, tenant)

    service = verbs.service(client, resources.sessions, resources.store)
    _check_comparison(await service.compare(verbs.operator(tenant), [first, second]), first, second)
    _check_comparison(
        await AgentClient(client, resources, tenant).task(first).compare(second), first, second
    )

    code, out, err = await agentctl(capsys, "compare", first, second)
    assert (code, err) == (0, "")
    assert "parts from 1 here" in out and PARTS in out
    assert "read_file (other path) → ok, different" in out
    assert "A and C are read." in out and "completed (unchecked)" in out
    code, out, _ = await agentctl(capsys, "compare", first, second, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["sessions"][1]["divergence"] == {
        "step": 1,
        "reason": "other arguments",
        "detail": "read_file: path",
    }
    assert shown["steps"][1]["sessions"][1]["calls"][0]["other_keys"] == ["path"]

    reader = await make_key(resources, tenant, "read")
    starter = await make_key(resources, tenant, "start")
    async with gateway_http(migrated, resources, client) as http:
        answer = await http.get(f"/v1/compare?sessions={first},{second}", headers=bearer(reader))
        refused = await http.get(f"/v1/compare?sessions={first},{second}", headers=bearer(starter))
        alone = await http.get(f"/v1/compare?sessions={first}", headers=bearer(reader))
    assert answer.status_code == 200, answer.text
    assert answer.json() == shown  # the gateway answers what --json prints
    assert refused.status_code == 403
    assert alone.status_code == 400
    assert alone.json()["error"]["message"] == "compare needs two sessions or more, got 1"


async def test_a_refused_comparison_says_why_in_one_line(
    migrated: StackEndpoints,
    client: Client,
    resources: Resources,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mine, theirs, cold = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for sid, owner in ((mine, tenant), (theirs, f"{tenant}-x"), (cold, tenant)):
        async with agent_state(resources.sessions, owner, write=True) as st:
            await st.sessions.create(sid, title="task", model_config={})
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.sessions.set_status(cold, SessionStatus.ARCHIVED)
    mine, theirs, cold = str(mine), str(theirs), str(cold)
    service = verbs.service(client, resources.sessions, resources.store)
    many = [str(uuid.uuid4()) for _ in range(MAX_SESSIONS + 1)]
    cases = {
        ("compare", mine): "compare needs two sessions or more, got 1",
        ("compare", *many): f"compare takes at most {MAX_SESSIONS} sessions, got 9",
        ("compare", mine, mine.upper()): f"session {mine} is named twice",
        ("compare", mine, "nonsense"): "not a session id: 'nonsense' (expected a UUID)",
        ("compare", mine, theirs): f"session {theirs} not found",
        ("compare", mine, cold): f"session {cold} is archived; restore it first "
        f"(agentctl archive restore {cold})",
    }
    for args, words in cases.items():
        code, out, err = await agentctl(capsys, *args)
        assert (code, out, err) == (1, "", f"error: {words}\n"), args
    with pytest.raises(InvalidTaskInput, match="got 1"):
        await service.compare(verbs.operator(tenant), [mine])
    with pytest.raises(SessionNotFound):
        await service.compare(verbs.operator(tenant), [mine, theirs])
    with pytest.raises(SessionNotFound, match=f"session {mine} not found"):
        await service.compare(verbs.operator(f"{tenant}-x"), [theirs, mine])


def test_a_check_stands_as_the_session_ended() -> None:
    assert check_outcome("completed", True, declared=True) == PASSED
    assert check_outcome("completed", False, declared=False) is None
    assert check_outcome("completed", False, declared=True) == "failed"
    assert check_outcome("check_failed", None, declared=True) == "failed"
    assert check_outcome("failed", None, declared=True) == "not reached"
    assert check_outcome("failed", None, declared=False) is None
