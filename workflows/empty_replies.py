"""A reply that is no answer (empty, bare arguments, example calls, cut at its limit: a
NonAnswer code) does not end the task: the loop nudges the model once, and a second one right
after the nudge ends the task as `no_answer`. Deterministic workflow code only."""

from __future__ import annotations

from temporalio import workflow

from durable_agents.workflows.contracts import AgentInput, NudgeInput
from durable_agents.workflows.state_writes import write_state

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.session_state import SessionStateActivities

NO_ANSWER = "no answer: the model's reply was empty or no answer again after it was told so"


async def nudge(inp: AgentInput, step: int, key: str, reason: str) -> None:
    """Commit the nudge (a user turn in the activity's own words for `reason`, a NonAnswer
    code) after step `step`."""
    await write_state(
        SessionStateActivities.record_nudge,
        NudgeInput(inp.session_id, inp.tenant_id, step, key, reason),
    )
