"""A task started by a plain Temporal client: the text comes inline, the workflow commits it.

A trusted backend may run `client.start_workflow("AgentWorkflow", AgentInput(session_id=...,
tenant_id=..., task_text=...))` (or `temporal workflow start`) without committing anything to
AgentState first. The start event then holds the text; the `open_session` activity reads it
from there (its own input holds ids only), creates the session and commits the text as the
task item, so no later event repeats it. Deterministic code only.
"""

from __future__ import annotations

import uuid

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from durable_agents.workflows.contracts import (
    AgentInput,
    OpenSessionInput,
    TaskDefaults,
    TaskDefaultsInput,
)
from durable_agents.workflows.policies import MAX_INLINE_TASK_BYTES
from durable_agents.workflows.state_writes import write_state

with workflow.unsafe.imports_passed_through():
    # Passed through: the class only names the method we schedule; its module (SQLAlchemy,
    # aioboto3) must not be re-imported in every workflow sandbox.
    from durable_agents.activities.session_open import (
        DEFAULT_AGENT,
        SessionOpenActivities,
        check_task_text,
    )


def _refused(message: str, error_type: str) -> ApplicationError:
    return ApplicationError(message, type=error_type, non_retryable=True)


async def open_session(inp: AgentInput) -> TaskDefaults:
    """Create the session and commit `inp.task_text` as its task; what the start left unset,
    as any door would have set it. A bad input fails the workflow at once (non-retryable),
    before anything is committed."""
    text = inp.task_text or ""
    try:
        uuid.UUID(inp.session_id)
        check_task_text(text, MAX_INLINE_TASK_BYTES)
    except ValueError as err:
        raise _refused(f"cannot start the task: {err}", "InvalidTaskInput") from None
    workflow_id = workflow.info().workflow_id
    try:
        defaults: TaskDefaults = await write_state(
            SessionOpenActivities.open_session,
            OpenSessionInput(
                session_id=inp.session_id,
                tenant_id=inp.tenant_id,
                agent=inp.agent or DEFAULT_AGENT,
                idempotency_key=f"{workflow_id}:task",
            ),
        )
    except ActivityError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError):
            # The activity's own words (ids, limits, error types): no content.
            raise _refused(f"cannot start the task: {cause.message}", cause.type or "") from err
        raise _refused(
            "cannot start the task: opening its session failed", "OpenSessionFailed"
        ) from err
    return defaults


async def task_defaults(inp: AgentInput) -> TaskDefaults:
    """What a run whose start left settings unset gets (a plain start's run resumed)."""
    found: TaskDefaults = await write_state(
        SessionOpenActivities.task_defaults, TaskDefaultsInput(inp.session_id, inp.tenant_id)
    )
    return found
