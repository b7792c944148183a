"""The loop's side of a task's check: before a final answer is accepted, the check activity
runs the task's check; a failure was told to the model, which takes another step, until the
check allows no more. Deterministic code only."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from durable_agents.workflows.check_contracts import CheckAnswerInput, CheckVerdict
from durable_agents.workflows.contracts import AgentInput

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.answer_checks import AnswerCheckActivities

# A command check runs up to 600 s (activities/checks/spec.py MAX_COMMAND_SECONDS).
CHECK_TIMEOUT = timedelta(minutes=11)
CHECK_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=5)


async def check_answer(
    inp: AgentInput, step: int, answer_item_id: str, key: str, *, unchecked: bool = False
) -> CheckVerdict:
    """The verdict on the answer at `step`; a sub-agent's is never checked (its parent is),
    nor one the model call found `unchecked` (its task declares no check)."""
    if inp.depth > 0 or unchecked:
        return CheckVerdict(checked=False, passed=True)
    verdict: CheckVerdict = await workflow.execute_activity_method(
        AnswerCheckActivities.check_answer,
        CheckAnswerInput(inp.session_id, inp.tenant_id, step, key, answer_item_id),
        start_to_close_timeout=CHECK_TIMEOUT,
        retry_policy=CHECK_RETRY,
    )
    return verdict


def check_failed_words(verdict: CheckVerdict) -> str:
    return f"check failed {verdict.failures} of {verdict.attempts} times: {verdict.reason}"
