"""A run's start input, checked before the run's first command, and the updates a client
sends it, checked in their validators: with the command layer's own rules.

Every door but one builds the input through the command layer, which checks it; a plain
Temporal client builds it by hand. So the workflow checks every input with the layer's own
rules (activities/policies/task_rules.py) and in its own id: a session's workflow id is derived from
the session id, so no start under another id can write into a session, running or not.
Deterministic code only.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from durable_agents.workflows.contracts import AgentInput
from durable_agents.workflows.policies import workflow_id_for
from durable_agents.workflows.session_open import open_session

with workflow.unsafe.imports_passed_through():
    # Passed through: pure functions and constants, and the RE2 binding the policy check
    # compiles with (a C extension, imported once per process, not per workflow run).
    from durable_agents.activities.agents import check_agent_name
    from durable_agents.activities.policies.task_rules import (
        MAX_DEPTH,
        InvalidTaskInput,
        check_task_settings,
    )
    from durable_agents.activities.policies.text_limits import check_text


def refused(err: InvalidTaskInput) -> ApplicationError:
    """The run's failure for `err`: the rule's own words (field, bound), never free text."""
    return ApplicationError(
        f"cannot run the task: {err}", err.field, type="InvalidTaskInput", non_retryable=True
    )


def _none(_: Any) -> None:
    return None


async def check_start(
    inp: AgentInput, fail: Callable[[str, str], Awaitable[ApplicationError]]
) -> None:
    """Refuse a start no door accepts before the first command. Under another id nothing
    is written; a bad option of a session that exists is recorded by `fail` (never stuck)."""
    try:
        check_identity(inp, workflow.info().workflow_id)
    except InvalidTaskInput as err:
        if inp.task_text is not None and err.field == "workflow_id":
            # open_session writes nothing here: it says whether the id is taken.
            await open_session(inp)
        raise refused(err) from None
    try:
        check_options(inp)
    except InvalidTaskInput as err:
        if inp.task_text is not None:  # no session yet: nothing to mark
            raise refused(err) from None
        await fail(f"cannot run the task: {err}", "InvalidTaskInput")
        raise refused(err) from None


def check_update(inp: AgentInput, request: Any, rules: Callable[[Any], None] = _none) -> None:
    """An update's validator: a request of another tenant is refused (a missing tenant like
    a wrong one: no caller skips the check by omission), then `rules` in their own words."""
    if getattr(request, "tenant_id", None) != inp.tenant_id:
        raise ApplicationError(
            "not a task of the caller's tenant (a request must name its own tenant)",
            type="TenantMismatch",
            non_retryable=True,
        )
    try:
        rules(request)
    except InvalidTaskInput as err:
        raise update_refused(err) from None


def update_refused(err: InvalidTaskInput) -> ApplicationError:
    """An update's refusal for `err`, in the rule's words."""
    return ApplicationError(str(err), err.field, type="InvalidTaskInput", non_retryable=True)


def check_identity(inp: AgentInput, workflow_id: str) -> None:
    """InvalidTaskInput unless the session id is a UUID in its one spelling and the
    workflow runs under the id derived from it (nothing may be written otherwise)."""
    try:
        canonical = str(uuid.UUID(inp.session_id))
    except (ValueError, AttributeError, TypeError):
        raise InvalidTaskInput("session_id", "session_id must be a UUID") from None
    if inp.session_id != canonical:
        raise InvalidTaskInput(
            "session_id", f"session_id must be spelled as a lower-case UUID ({canonical})"
        )
    expected = workflow_id_for(canonical)
    if workflow_id != expected:
        raise InvalidTaskInput(
            "workflow_id", f"a task of session {canonical} runs as workflow {expected} only"
        )


def check_options(inp: AgentInput) -> None:
    """InvalidTaskInput for an option no door accepts (the command layer's rules), a depth
    or cursor out of range, or a first run's start that is not a fresh task."""
    check_task_settings(inp.settings)
    if (
        isinstance(inp.depth, bool)
        or not isinstance(inp.depth, int)
        or not (0 <= inp.depth <= MAX_DEPTH)
    ):
        raise InvalidTaskInput("depth", f"depth must be >= 0 and <= {MAX_DEPTH}")
    for name in ("step", "seen_messages", "received_messages"):
        value = getattr(inp, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidTaskInput(name, f"{name} must be a whole number >= 0")
    if inp.task_text is not None:
        try:
            check_text("task_text", inp.task_text)
        except ValueError as err:
            raise InvalidTaskInput("task_text", str(err)) from None
        fresh = (inp.step, inp.seen_messages, inp.received_messages, inp.depth) == (0, 0, 0, 0)
        if not fresh or inp.compaction is not None:
            raise InvalidTaskInput(
                "task_text", "a start with task_text begins a new task: no cursors, depth 0"
            )
        try:
            check_agent_name(inp.agent or "default")
        except ValueError:
            raise InvalidTaskInput(
                "agent", "agent must be 1-64 letters, digits, '_' or '-'"
            ) from None
