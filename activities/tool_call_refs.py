"""The tool calls of a committed reply as the loop sees them: ids, whether each must wait for
a decision under the policies in force, and any decision AgentState already holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable_agents.activities.agent_catalog import AgentRuntime
from durable_agents.activities.errors import non_retryable
from durable_agents.activities.policies.approval_policy import call_policies, needs_any
from durable_agents.activities.reply_items import calls_run
from durable_agents.storage.items import ItemRepository
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workflows.contracts import ToolCallRef


async def tool_call_refs(
    items: ItemRepository,
    row: ItemRow,
    agent: AgentRuntime,
    agent_policies: Mapping[str, str],
    approvals: Mapping[str, Any],
    call_rows: Mapping[str, ItemRow],
) -> list[ToolCallRef]:
    """The refs of reply `row`'s calls. `approvals`: the session's record (the task's
    policies, which only add approvals, and loosenings an authorised caller made);
    `call_rows`: the tool_call items when this attempt just wrote them."""
    task_policies, loosened = approvals.get("policies", {}), approvals.get("loosened", {})
    calls = []
    for call in calls_run(row):
        tool = agent.registry.get(call["name"])
        call_row = call_rows.get(call["id"])
        decision = None
        if call_row is None:
            # A re-read of a committed step (a retry, a resumed run): decisions made
            # since travel with the call, so nobody is asked twice.
            thread = await items.call_thread(row.session_id, call["id"])
            if thread is None:
                raise non_retryable("ToolCallNotFound", f"no tool call {call['id']} in session")
            call_row, decision = thread.call, decision_of(thread.others)
        policies = call_policies(
            call["name"],
            tool.policy_names if tool is not None else (),
            default="always" if tool and tool.needs_approval else "never",
            agent=agent_policies,
            task=task_policies,
            loosened=loosened,
        )
        calls.append(
            ToolCallRef(
                tool_call_id=call["id"],
                # Only names of our own tools enter history; an unknown name the model
                # made up stays in AgentState, where run_tool reads it to say so.
                name=call["name"] if tool is not None else "",
                item_id=str(call_row.id),
                needs_approval=needs_any(policies, call_row.data.get("arguments", {})),
                known=tool is not None,
                decision=decision,
                on_device=call["name"] in agent.on_device,
            )
        )
    return calls


def decision_of(call_items: list[ItemRow]) -> bool | None:
    """The approval decision the loop recorded for a call (record_approval), if any."""
    for item in call_items:
        # A re-run's decision (the call was in doubt) is not the call's first approval.
        if item.kind == ItemKind.APPROVAL and "approved" in item.data and "rerun" not in item.data:
            return bool(item.data["approved"])
    return None
