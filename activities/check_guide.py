"""A check that guides (`Check(guide=True)`): run before each model step that follows tool
results, as it would judge an answer then. While it fails whatever the answer would be (it
never read one), the reply must call a tool, and the check's reason follows the latest
result as a turn of its own: where a small model looks for what to do next. Told at a
failed answer to read a file and then add its line, the 0.5B model read the file and
followed the file's own pointer to another one; with the next call named after the
result, it added the line.

The request's fingerprint is made before the guide is added (activities/model_call.py):
the guide is read off the workspace, which a replay whose tools are replayed leaves as it
was, so a replay of the same conversation still finds its recorded reply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from itertools import takewhile
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.answer_checks import call_done, checks_of
from durable_agents.activities.checks.runner import CheckFailure, first_failure
from durable_agents.activities.checks.spec import MAX_CALLS_SEEN, CallDone, Check
from durable_agents.activities.providers.base import ChatMessage, ModelRequest
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.models import SessionRow
from durable_agents.vocabulary.previews import ERROR_PREFIX

# Before the reason, so the model can tell whose words these are.
GUIDE_LEAD = "The task's check: "


async def with_guide(
    request: ModelRequest,
    sessions: async_sessionmaker[AsyncSession],
    agent_checks: Mapping[str, Check] | None,
    session: SessionRow,
    root: Path | None,
) -> ModelRequest:
    """`request` as sent: guided when it follows a tool result (the checks run only then:
    before the task's first call its workspace may not be there yet)."""
    last = request.messages[-1] if request.messages else None
    if not request.tools or last is None or last.role != "tool":
        return request
    return guided(request, await guide_failure(sessions, agent_checks, session, root))


async def guide_failure(
    sessions: async_sessionmaker[AsyncSession],
    agent_checks: Mapping[str, Check] | None,
    session: SessionRow,
    root: Path | None,
) -> CheckFailure | None:
    """What the session's checks that guide (an agent's, as `agent_checks` has them: a
    start's check is data, never a guide; none for a sub-agent) find wrong in the workspace
    at `root` (None: not on this worker, or packed away), with the session's calls so far.
    None when they pass or there are none, or when the failing one read the answer (there
    is none yet)."""
    found = checks_of(agent_checks or {}, session.parent_id, session.agent_definition, None)
    checks = [check for check in found if check.guide]
    if not checks or root is None:
        return None
    calls: list[CallDone] = []
    if any(check.call is not None for check in checks):
        async with agent_state(sessions, session.tenant_id, autocommit=True) as st:
            rows = await st.items.calls_done(session.id, MAX_CALLS_SEEN)
        calls = [call_done(row) for row in rows]
    failure = await first_failure(checks, root, "", None, calls)
    # Passed, nothing is said: told "the task is done", the 1.5B model answered with those
    # words instead of saying what it did.
    return None if failure is None or failure.answer_read else failure


def guided(request: ModelRequest, failure: CheckFailure | None) -> ModelRequest:
    """`request` with the failure's reason as a user turn after its latest tool result, and
    a call required; as it is without a failure, or when the request does not follow a tool
    result. A turn of its own, not words added to the result: the 1.5B model, the reason
    written after a file's contents, put it in its summary of the file. Not after a reply
    with a failed call, whose error says what to do: told by add_to_report which of the
    file's words would count and then the check's general words, the 1.5B model sent the
    same line again, four times."""
    if failure is None or not request.tools or not request.messages:
        return request
    results = list(takewhile(lambda m: m.role == "tool", reversed(request.messages)))
    if not results:
        return request
    if any(m.content.startswith(ERROR_PREFIX) for m in results):
        return replace(request, call_required=True)
    told = ChatMessage(role="user", content=f"{GUIDE_LEAD}{failure.reason}")
    return replace(request, messages=[*request.messages, told], call_required=True)
