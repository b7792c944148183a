"""A workspace read that repeats the session's previous call (in the order the model made
them), arguments and result alike: nothing new, said so instead of the same result again.

Held to tool calls until it changed the workspace, the 0.5B model read the same file with the
same arguments 14 times, each a success, so it ran to the step limit instead of ending
`stuck`. Such a result is a note (REPEATED_NOTE) marked `unchanged`, which the loop counts as
no progress (workflows/progress.py): the same call and result again and again ends the task
`stuck`. The full result is the previous call's, already in the model's context."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from durable_agents.activities.tools.base import Tool, ToolOutput
from durable_agents.storage.agent_state import AgentState
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.item_marks import REPEATS_KEY

REPEATED_NOTE = (
    "Nothing new: this call repeats your previous one (the same tool and arguments), and "
    "its result is the same as that one's, shown above. Use it: call the next tool the task "
    "needs, not this one again."
)
REPEATED = ToolOutput(REPEATED_NOTE.encode(), changed=False)
# The tools whose repeats are told so: the workspace's own reads, whose result is the
# workspace as it is. Other read-only tools (an MCP server's status, say) may be polled.
WORKSPACE_READS = frozenset({"read_file", "list_dir", "search_files"})


@dataclass(frozen=True)
class LastCall:
    """The session's latest tool call whose result is no error: its tool (the name the model
    used), arguments and result's sha256."""

    name: str
    arguments: dict[str, Any]
    sha256: str | None


async def last_call(
    st: AgentState, session_id: uuid.UUID, tool: Tool | None, tool_call_id: str
) -> LastCall | None:
    """For a call of a workspace read (WORKSPACE_READS), the call just before it in the
    session (by the order the model made them, not the order results came in) with its
    result; None for any other tool, or when that call has no result or failed."""
    if tool is None or tool.effect != "read_only" or tool.spec.name not in WORKSPACE_READS:
        return None
    this = await st.items.tool_call(session_id, tool_call_id)
    before = None if this is None else await st.items.call_before(session_id, this.ordinal)
    if before is None or not before.tool_call_id:
        return None
    thread = await st.calls.thread(session_id, before.tool_call_id)
    result = (
        next((r for r in reversed(thread.others) if r.kind == ItemKind.TOOL_RESULT), None)
        if thread is not None
        else None
    )
    if result is None or result.data.get("error_type"):
        return None
    call = await st.calls.effective(session_id, before.tool_call_id)
    if call is None:
        return None
    # A repeat's result is the note: what it repeated is the result to compare.
    sha = result.data.get(REPEATS_KEY) or (result.data.get("artifact") or {}).get("sha256")
    return LastCall(call.tool_name, call.arguments, sha if isinstance(sha, str) else None)


def repeated(
    last: LastCall | None, name: str, arguments: dict[str, Any], content: bytes
) -> str | None:
    """The sha256 of the result a read-only call's ``content`` repeats when ``last`` was the
    same call with the same result, else None."""
    if last is None or last.sha256 is None or last.name != name:
        return None
    if _canonical(last.arguments) != _canonical(arguments):
        return None
    return last.sha256 if hashlib.sha256(content).hexdigest() == last.sha256 else None


def _canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
