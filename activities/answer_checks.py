"""The check a task's final answer must pass: its agent's (`Agent(check=...)`) and its
start's (kept with the session), run in the session's workspace before the loop accepts
the answer. A failure is committed as a user turn the model can act on, under the step's
key, so a retried activity neither checks nor tells twice. A sub-agent's answer goes to its
parent, which is checked: a child session is not."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.checks.runner import first_failure
from durable_agents.activities.checks.spec import MAX_CALLS_SEEN, CallDone, Check
from durable_agents.activities.errors import storage_errors_are_final
from durable_agents.activities.tools.tool_identity import tool_identity
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.workspace_seed import seed_if_new
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.item_marks import CHECK_FAILED, CHECK_KEY, CHECK_STANDS_KEY
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workflows.check_contracts import CheckAnswerInput, CheckVerdict


def told(reason: str, failures: int, attempts: int, workspace_only: bool = False) -> str:
    """What the model hears when its answer fails the task's check."""
    left = attempts - failures
    change = (
        "The check reads the files, not your answer: change them with your tools first"
        if workspace_only
        else "Do what the task asks with your tools"
    )
    return (
        f"Your answer was not accepted: the task's check failed: {reason}. {change}, then "
        "answer again" + (f" ({left} more {'try' if left == 1 else 'tries'})." if left > 0 else ".")
    )


def checks_of(
    agent_checks: Mapping[str, Check], parent: uuid.UUID | None, agent: str, declared: object
) -> list[Check]:
    """The checks a session's answer must pass: none for a sub-agent (`parent` set), else
    its agent's (by name, in `agent_checks`) and its start's (`declared`, the session's
    task_check)."""
    if parent is not None:
        return []
    found = [agent_checks[agent]] if agent in agent_checks else []
    if declared:
        found.append(Check.from_start(declared))  # kept as a door checked it
    return found


def declares_check(agent_checks: Mapping[str, Check] | None, session: SessionRow) -> bool:
    """Whether the session's answer has a check to pass (True when `agent_checks`, the
    worker's checks by agent, are not known)."""
    if agent_checks is None:
        return True
    return bool(
        checks_of(agent_checks, session.parent_id, session.agent_definition, session.task_check)
    )


class AnswerCheckActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        workspace: WorkspaceLayout | Path,
        checks: Mapping[str, Check] | None = None,
        *,
        tool_user: str | None = None,
    ) -> None:
        """`checks`: the check of each agent this worker serves that declares one, by
        agent name; `tool_user`: whom a command check runs as (AGENT_TOOL_USER)."""
        self._sessions = sessions
        self._workspace = workspace
        self._checks = dict(checks or {})
        self._tool_user = tool_user

    @activity.defn(name="check_answer")
    async def check_answer(self, inp: CheckAnswerInput) -> CheckVerdict:
        session_id = uuid.UUID(inp.session_id)
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, autocommit=True) as st,
        ):
            session = await st.sessions.get(session_id)
            checks = self._checks_of(
                session.parent_id, session.agent_definition, session.task_check
            )
            if not checks:
                return CheckVerdict(checked=False, passed=True)
            attempts = checks[-1].attempts
            done = await st.items.by_key(inp.idempotency_key)
            failures = await st.items.count_marked(session_id, CHECK_KEY, CHECK_FAILED)
            if done is not None:  # checked and told before this attempt ended
                told_reason = str(done.data.get("reason", ""))
                return CheckVerdict(True, False, failures, attempts, told_reason)
            answer = await st.items.get(session_id, uuid.UUID(inp.answer_item_id))
            root = self._root(inp.tenant_id, session)
            calls = (
                [call_done(row) for row in await st.items.calls_done(session_id, MAX_CALLS_SEEN)]
                if any(c.call is not None for c in checks)
                else []
            )
        run_as = (
            tool_identity(self._tool_user, "a task's check command")
            if any(c.command for c in checks)
            else None
        )
        await seed_if_new(self._workspace, inp.tenant_id, session, root)
        found = await first_failure(checks, root, answer.text if answer else "", run_as, calls)
        if found is None:
            return CheckVerdict(True, True, failures, attempts)
        reason = found.reason
        failures += 1
        text = told(reason, failures, attempts, found.workspace_only)
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id, write=True) as st,
        ):
            await st.items.append(
                NewItem(
                    session_id=session_id,
                    kind=ItemKind.USER_MESSAGE,
                    role="user",
                    idempotency_key=inp.idempotency_key,
                    text=text,
                    tokens=count_tokens(text),
                    data={
                        CHECK_KEY: CHECK_FAILED,
                        "reason": reason,
                        "step": inp.step,
                        **({CHECK_STANDS_KEY: True} if found.workspace_only else {}),
                    },
                )
            )
        return CheckVerdict(True, False, failures, attempts, reason)

    def _checks_of(self, parent: uuid.UUID | None, agent: str, declared: object) -> list[Check]:
        return checks_of(self._checks, parent, agent, declared)

    def _root(self, tenant_id: str, session: SessionRow) -> Path:
        if isinstance(self._workspace, WorkspaceLayout):
            return self._workspace.root_for(tenant_id, session)
        return self._workspace


def call_done(row: ItemRow) -> CallDone:
    """A committed call as a check sees it: its tool's name and its arguments (none when
    the model's were not a JSON object)."""
    arguments = row.data.get("arguments")
    return CallDone(row.tool_name or "", arguments if isinstance(arguments, dict) else {})
