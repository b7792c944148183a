"""The tool calls of a committed reply as the loop sees them: ids, whether each must wait for
a decision under the policies in force, and any decision AgentState already holds.

An `exists:ARG` policy looks ARG up in the session's workspace here, at decision time. A
call it lets through unasked (ARG named nothing) must still find nothing when it runs:
`unasked_new_args` tells run_tool which arguments, and a call that finds one now names
something is refused, nothing done (asking is the model's next call). The decision is not
asked again at run time: run_tool cannot wait for a person, the loop can.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durable_agents.activities.agent_catalog import AgentRuntime
from durable_agents.activities.context.model_context import ConfigCache
from durable_agents.activities.errors import non_retryable
from durable_agents.activities.policies.approval_policy import (
    Existence,
    call_policies,
    existence_args,
    needs_any,
)
from durable_agents.activities.reply_items import calls_run
from durable_agents.activities.tools.args import check_allowed, check_args
from durable_agents.activities.tools.base import Tool, ToolError
from durable_agents.activities.tools.workspace_probe import names_entry
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.items import ItemRepository
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workflows.contracts import ToolCallRef


async def tool_call_refs(
    items: ItemRepository,
    row: ItemRow,
    agent: AgentRuntime,
    agent_policies: Mapping[str, str],
    approvals: Mapping[str, Any],
    call_rows: Mapping[str, ItemRow],
    workspace: Path | None = None,
) -> list[ToolCallRef]:
    """The refs of reply `row`'s calls. `approvals`: the session's record (the task's
    policies, which only add approvals, and loosenings an authorised caller made);
    `call_rows`: the tool_call items when this attempt just wrote them; `workspace`: the
    session's workspace root when this worker can look at it (None: `exists:` asks)."""
    calls = []
    for call in calls_run(row):
        tool = agent.registry.get(call["name"])
        call_row = call_rows.get(call["id"])
        decision, ran = None, False
        if call_row is None:
            # A re-read of a committed step (a retry, a resumed run): decisions made
            # since travel with the call, so nobody is asked twice.
            thread = await items.call_thread(row.session_id, call["id"])
            if thread is None:
                raise non_retryable("ToolCallNotFound", f"no tool call {call['id']} in session")
            call_row, decision = thread.call, decision_of(thread.others)
            ran = any(r.kind == ItemKind.TOOL_RESULT for r in thread.others)
        policies = policies_of(call["name"], tool, agent_policies, approvals)
        on_device = call["name"] in agent.on_device
        # A device's files are on the device: the cloud cannot look, so `exists:` asks.
        where = None if on_device else workspace
        arguments = call_row.data.get("arguments", {})
        refused = tool is not None and not on_device and refused_unrun(tool, arguments)
        needs = not refused and await _needs(policies, arguments, _existence(where, decision, ran))
        calls.append(
            ToolCallRef(
                tool_call_id=call["id"],
                # Only names of our own tools enter history; an unknown name the model
                # made up stays in AgentState, where run_tool reads it to say so.
                name=call["name"] if tool is not None else "",
                item_id=str(call_row.id),
                needs_approval=needs,
                known=tool is not None,
                decision=decision,
                on_device=on_device,
            )
        )
    return calls


def refused_unrun(tool: Tool, arguments: dict[str, Any]) -> bool:
    """Whether run_tool refuses the call before anything runs, whatever a person decides:
    its arguments were not JSON, or name what the tool does not take. Nobody is asked to
    approve it; the model gets the refusal as the call's result. The same checks run_tool
    makes first (and the arguments it checks are these: only an approval can edit them)."""
    try:
        check_args(arguments, tool.spec.name, tool.spec.parameters)
        check_allowed(arguments, tool.spec.parameters)
    except ToolError:
        return True
    return False


def policies_of(
    name: str, tool: Tool | None, agent_policies: Mapping[str, str], approvals: Mapping[str, Any]
) -> tuple[str, ...]:
    """Every policy a call of tool `name` must pass (see call_policies)."""
    return call_policies(
        name,
        tool.policy_names if tool is not None else (),
        default=tool.default_policy if tool is not None else "never",
        agent=agent_policies,
        task=approvals.get("policies", {}),
        loosened=approvals.get("loosened", {}),
    )


def _existence(workspace: Path | None, decision: bool | None, ran: bool) -> Existence | None:
    """How `exists:` policies look their argument up for this call. A call re-read after
    it was decided or ran keeps what held then: a file it wrote itself since must not make
    a resumed run ask about it."""
    if decision is not None:
        return lambda _: True  # it was asked
    if ran:
        return lambda _: False  # it ran unasked
    if workspace is None:
        return None
    return functools.partial(names_entry, workspace)


async def _needs(
    policies: tuple[str, ...], arguments: dict[str, Any], exists: Existence | None
) -> bool:
    if exists is None or not existence_args(policies):
        return needs_any(policies, arguments, exists)
    # A few syscalls, but on a disk that may stall: off the event loop.
    return await asyncio.to_thread(needs_any, policies, arguments, exists)


async def unasked_new_args(
    st: AgentState,
    session: SessionRow,
    tool_call_id: str,
    name: str,
    tool: Tool | None,
    configs: ConfigCache,
) -> frozenset[str]:
    """The arguments of a call about to run that must still name nothing in the workspace:
    those its `exists:` policies looked up, when it runs without a person's approval.
    The policies are the decision's: the session's and its latest turn's agent's."""
    if tool is None:
        return frozenset()
    approvals = session.approvals or {}
    args = existence_args(
        policies_of(name, tool, await _turn_agent_policies(st, session.id, configs), approvals)
    )
    if not args:
        return args
    thread = await st.calls.thread(session.id, tool_call_id)
    if thread is None or decision_of(thread.others) is not None:
        return frozenset()  # asked: approved (a rejected call never runs)
    return args


async def _turn_agent_policies(
    st: AgentState, session_id: uuid.UUID, configs: ConfigCache
) -> Mapping[str, str]:
    turn = await st.turns.latest(session_id)
    if turn is None or turn.context_config_id is None:
        return {}
    config = await configs.load(st.configs, st.tenant_id, turn.context_config_id)
    approvals: Mapping[str, str] = config.agent.get("approvals", {})
    return approvals


def decision_of(call_items: list[ItemRow]) -> bool | None:
    """The approval decision the loop recorded for a call (record_approval), if any."""
    for item in call_items:
        # A re-run's decision (the call was in doubt) is not the call's first approval.
        if item.kind == ItemKind.APPROVAL and "approved" in item.data and "rerun" not in item.data:
            return bool(item.data["approved"])
    return None
