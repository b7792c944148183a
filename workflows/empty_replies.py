"""An empty reply is not an answer: the loop nudges the model once, and a second empty reply
in a row ends the task as `no_answer`. Deterministic workflow code only."""

from __future__ import annotations

from temporalio import workflow

from durable_agents.workflows.contracts import AgentInput, NudgeInput
from durable_agents.workflows.state_writes import write_state

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.session_state import SessionStateActivities

NO_ANSWER = "no answer: the model's reply was empty again after it was told so"


async def nudge(inp: AgentInput, step: int, key: str) -> None:
    """Commit the nudge (a user turn in the activity's own words) after step `step`."""
    await write_state(
        SessionStateActivities.record_nudge,
        NudgeInput(inp.session_id, inp.tenant_id, step, key),
    )
