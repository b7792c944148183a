"""A workspace read that repeats an earlier one of the reads made just before it, the same
tool with the same result: it brings nothing new, and is marked so. The reads compared are
those since the model last called any other tool (but one that changed nothing), within the
turn (since a person's latest message: a failed check and a nudge are the loop's own
words).

Held to tool calls until it changed the workspace, the 0.5B model read the same file with the
same arguments 14 times, each a success, so it ran to the step limit instead of ending
`stuck`; told so of the call just before, it went round instead (list a directory, read the
README, list another, read a note, read it again, list the first...). Such a result is
marked `unchanged`, which the loop counts as no progress (workflows/progress.py) and which
withholds the tool from the next replies until one brings something new
(activities/context/call_expected.py), and `repeats` (the sha256 of the result it repeats).
A read after another tool's call is never a repeat: the 1.5B model, its report line refused
for naming nothing in a file, read the file again to write a better one. A repeat of the
call just before it is a note instead of the same content (repeated_note); one further back
keeps its content, which the context may hold only as an excerpt by then, or a summary."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from durable_agents.activities.tools.base import Tool, ToolOutput
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.call_reads import effective_call
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.item_marks import REPEATS_KEY

# The arguments a note shows of the call it repeats, at most (JSON, then cut).
_SHOWN_ARGUMENTS = 200
# How many of the calls before a read it is compared with, at most.
TURN_CALLS = 32
# The tools whose repeats are told so: the workspace's own reads, whose result is the
# workspace as it is. Other read-only tools (an MCP server's status, say) may be polled.
WORKSPACE_READS = frozenset({"read_file", "list_dir", "search_files"})


@dataclass(frozen=True)
class EarlierCall:
    """One of the turn's tool calls whose result is no error: its tool (the name the model
    used), arguments, result's sha256, and how far back it was made (1: just before)."""

    name: str
    arguments: dict[str, Any]
    sha256: str
    back: int


async def turn_calls(
    st: AgentState, session_id: uuid.UUID, tool: Tool | None, tool_call_id: str
) -> tuple[EarlierCall, ...]:
    """For a call of a workspace read (WORKSPACE_READS), the workspace reads made just
    before it in its turn (by the order the model made them, not the order results came in;
    back to the latest call of another tool that did not come to `unchanged`, at most
    TURN_CALLS) that have a result and did not fail; none for any other tool."""
    if tool is None or tool.effect != "read_only" or tool.spec.name not in WORKSPACE_READS:
        return ()
    this = await st.items.tool_call(session_id, tool_call_id)
    if this is None:
        return ()
    earlier: list[EarlierCall] = []
    threads = await st.calls.before(session_id, this.ordinal, TURN_CALLS)
    for back, thread in enumerate(threads, start=1):
        result = next((r for r in reversed(thread.others) if r.kind == ItemKind.TOOL_RESULT), None)
        if thread.call.tool_name not in WORKSPACE_READS:
            # A call that changed nothing (a line the file already held) is no reason to
            # read again: the 0.5B model went round adding the same line and reading.
            if result is not None and result.data.get("unchanged"):
                continue
            break
        if result is None or result.data.get("error_type"):
            continue
        call = effective_call(thread)
        # A repeat's result may be the note: what it repeated is the result to compare.
        sha = result.data.get(REPEATS_KEY) or (result.data.get("artifact") or {}).get("sha256")
        if isinstance(sha, str):
            earlier.append(EarlierCall(call.tool_name, call.arguments, sha, back))
    return tuple(earlier)


def repeated(earlier: Sequence[EarlierCall], name: str, content: bytes) -> EarlierCall | None:
    """The latest of the ``earlier`` calls that a call of tool ``name`` repeats: the same
    tool with the same result (``content``), whatever the arguments: told of a repeat, the
    0.5B model read the same file again with another `max_bytes`."""
    sha = hashlib.sha256(content).hexdigest()
    return next((c for c in earlier if c.name == name and c.sha256 == sha), None)


def repeat_output(output: ToolOutput, of: EarlierCall) -> ToolOutput:
    """What a read repeating ``of`` returns: a note when ``of`` is the call just before it,
    else its own content; unchanged either way."""
    if of.back > 1:
        return replace(output, changed=False)
    return ToolOutput(repeated_note(of).encode(), changed=False)


def repeated_note(of: EarlierCall) -> str:
    """The result of a call repeating ``of``, the call just before it."""
    shown = _canonical(of.arguments)
    if len(shown) > _SHOWN_ARGUMENTS:
        shown = shown[: _SHOWN_ARGUMENTS - 1] + "…"
    return (
        f"Nothing new: this result is the same as that of your call {of.name} {shown}, shown "
        "above. Use it: call the next tool the task needs, not this one again."
    )


def _canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
