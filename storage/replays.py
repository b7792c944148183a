"""Replays in AgentState: a replay is a fork of a recorded session at its first step
(storage/forks.py) whose row carries a mark, `sessions.replay` = {"of": the recorded
session's id, "live_tools": [names]}. Its activities read the recorded session's reply and
results at the same step from here, and commit a recorded result by reference: the replay's
tool_result item names the recorded one's artifact (and holds a checkpoint ref on it); no
object is copied and no row of the recorded session is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.forks import NotForkable
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.vocabulary.item_kinds import ItemKind

# Where an item of a replay says how it was served: a reply from the record (RECORDED) or
# the provider (LIVE); a tool result from the record, a live run, or refused (REFUSED: no
# recorded result, and the tool is not run live).
SERVED_KEY = "served"
RECORDED, LIVE, REFUSED = "recorded", "live", "refused"
# On a reply served LIVE: which part of the request differed from the record's.
MISS_KEY = "replay_miss"
# What a replayed result does not carry over from the recorded one: its step is the
# replay's, and it is no effect of the replay's (nothing to settle or run again).
_NOT_CARRIED = frozenset({"step", "effect", "rerun", SERVED_KEY})


class NotReplayable(NotForkable):
    """The session cannot be replayed (no model step, not ended, a sub-agent's); nothing was
    written."""

    error_type = "NotReplayable"


@dataclass(frozen=True)
class ReplayMark:
    """A replay's row mark: the session it replays and the tools it runs live."""

    of: uuid.UUID
    live_tools: frozenset[str]

    def record(self) -> dict[str, Any]:
        """The mark as the row keeps it."""
        return {"of": str(self.of), "live_tools": sorted(self.live_tools)}


def replay_mark(session: SessionRow) -> ReplayMark | None:
    """The session's replay mark, or None when it is no replay."""
    mark = session.replay
    if not mark:
        return None
    return ReplayMark(uuid.UUID(str(mark["of"])), frozenset(mark.get("live_tools") or ()))


@dataclass(frozen=True)
class RecordedReply:
    """A recorded model step: its assistant item and the tool_call items of its calls, in
    the order the reply asked for them."""

    reply: ItemRow
    calls: tuple[ItemRow, ...]


async def recorded_reply(st: AgentState, session_id: uuid.UUID, step: int) -> RecordedReply | None:
    """The session's model reply at `step` with its calls (None: it has none there)."""
    visible = await st.items.visible(session_id)
    reply = await st.db.scalar(
        select(ItemRow)
        .where(
            visible,
            ItemRow.kind == ItemKind.ASSISTANT_MESSAGE,
            ItemRow.data["step"].astext == str(step),
        )
        .order_by(ItemRow.ordinal)
        .limit(1)
    )
    if reply is None:
        return None
    ids = [str(c["id"]) for c in reply.data.get("tool_calls", [])]
    rows: dict[str, ItemRow] = {}
    if ids:
        found = await st.db.scalars(
            select(ItemRow).where(
                visible, ItemRow.kind == ItemKind.TOOL_CALL, ItemRow.tool_call_id.in_(ids)
            )
        )
        rows = {r.tool_call_id or "": r for r in found}
    return RecordedReply(reply, tuple(rows[i] for i in ids if i in rows))


async def recorded_result(
    st: AgentState,
    session_id: uuid.UUID,
    step: int,
    tool_call_id: str,
    name: str,
    arguments: Mapping[str, Any],
) -> ItemRow | None:
    """The committed result of the session's call at `step` of tool `name` with these
    arguments (the model's, as asked), the one of the same call id first; None when the
    record has no such call or the call no result."""
    recorded = await recorded_reply(st, session_id, step)
    if recorded is None:
        return None
    same = [
        c
        for c in recorded.calls
        if c.tool_name == name and c.data.get("arguments", {}) == dict(arguments)
    ]
    same.sort(key=lambda c: c.tool_call_id != tool_call_id)
    for call in same:
        rows = await st.items.for_tool_call(session_id, call.tool_call_id or "")
        results = [r for r in rows if r.kind == ItemKind.TOOL_RESULT]
        if results:
            return results[-1]  # a call settled again after it was in doubt: the newest
    return None


async def commit_replayed_result(
    st: AgentState,
    recorded: ItemRow,
    *,
    session_id: uuid.UUID,
    tool_call_id: str,
    tool_name: str,
    step: int,
    idempotency_key: str,
) -> ItemRow:
    """The replay's result of a call, as the recorded result `recorded` (its preview, its
    error, its artifact by reference), once per idempotency key in this unit of work."""
    done = await st.items.by_key(idempotency_key)
    if done is not None:
        return done
    data = {k: v for k, v in recorded.data.items() if k not in _NOT_CARRIED}
    data |= {"step": step, SERVED_KEY: RECORDED}
    if recorded.artifact_id is not None:
        # The session needs the object for as long as it may resume, as its own results.
        await st.artifacts.lock_content(str(recorded.data.get("artifact", {}).get("sha256")))
        await st.artifacts.add_ref(
            recorded.artifact_id,
            owner_type="checkpoint",
            owner_id=str(session_id),
            required_for_resume=True,
        )
    row, _ = await st.items.append(
        NewItem(
            session_id=session_id,
            kind=ItemKind.TOOL_RESULT,
            role="tool",
            idempotency_key=idempotency_key,
            text=recorded.text,
            tokens=recorded.tokens,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            data=data,
            artifact_id=recorded.artifact_id,
        )
    )
    return row


async def offered_tools(st: AgentState, session_id: uuid.UUID) -> set[str]:
    """The tool names the session's turns offered its model (their recorded configs)."""
    names: set[str] = set()
    for turn in await st.turns.for_session(session_id):
        if turn.context_config_id is not None:
            config = await st.configs.load(turn.context_config_id)
            names |= {str(s.get("name")) for s in config.tool_schemas}
    return names
