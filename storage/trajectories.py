"""A session's trajectory as AgentState holds it, step by step: what the model said, the
calls it asked for with their arguments, what each call's result was (by content hash, not
content), the tokens the step used and, in a replay, where each reply and result came from.

Two trajectories compare with workers/client/trajectories.py (`first_divergence`); a replay
reports against its recorded session so, and any two sessions of a tenant can be set side by
side the same way. Read from the committed items only: nothing here is written.
"""

from __future__ import annotations

import uuid
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.models import ItemRow
from durable_agents.storage.replays import MISS_KEY, SERVED_KEY, replay_mark
from durable_agents.vocabulary.item_kinds import ItemKind

_KINDS = (ItemKind.ASSISTANT_MESSAGE, ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT)


@dataclass(frozen=True)
class Result:
    """A call's committed result: the sha256 of its stored content (None: it stored none,
    an error only), its error type, and in a replay where it came from (recorded, live,
    refused; None outside a replay)."""

    sha256: str | None
    error_type: str | None = None
    served: str | None = None


@dataclass(frozen=True)
class Call:
    """A tool call the model asked for: the tool's name as the model wrote it, the model's
    arguments, and its result (None: it has none yet, or never ran)."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    result: Result | None = None


@dataclass(frozen=True)
class Step:
    """One model step: the reply's text, its calls in the order asked, the tokens the reply
    used (input and output; 0 for a reply served from a record), and in a replay whether the
    reply was served from the record or the live model and, when live, which part of the
    request differed from the record's (`miss`).

    `key`: the reply's idempotency key, which its usage row (storage/usage.py) is kept
    under. `seconds`: from the commit of the item before the reply (the task's message, or
    the previous step's last result) to the commit of the step's last item (its reply, or
    its calls' last result): the model's call, its tools and any approval waited for. Items
    are stamped when their transaction starts, a few milliseconds before it commits."""

    step: int
    text: str
    calls: tuple[Call, ...] = ()
    tokens: int = 0
    served: str | None = None
    miss: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    key: str = field(default="", compare=False)
    seconds: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Trajectory:
    """A session's steps in order, with its status and times. `replay_of`: the recorded
    session when this session is a replay of it."""

    session_id: uuid.UUID
    status: str
    steps: tuple[Step, ...] = ()
    replay_of: uuid.UUID | None = None
    created_at: datetime | None = field(default=None, compare=False)
    updated_at: datetime | None = field(default=None, compare=False)

    @property
    def seconds(self) -> float:
        """From the session's creation to its last status write."""
        if self.created_at is None or self.updated_at is None:
            return 0.0
        return (self.updated_at - self.created_at).total_seconds()


async def load_trajectory(st: AgentState, session_id: uuid.UUID) -> Trajectory:
    """The session's trajectory (SessionNotFound for another tenant's session)."""
    session = await st.sessions.get(session_id)
    visible = await st.items.visible(session_id)
    rows = await st.db.scalars(
        select(ItemRow).where(visible, ItemRow.kind.in_(_KINDS)).order_by(ItemRow.ordinal)
    )
    stamps = await st.db.execute(
        select(ItemRow.ordinal, ItemRow.created_at).where(visible).order_by(ItemRow.ordinal)
    )
    mark = replay_mark(session)
    return Trajectory(
        session_id,
        session.status,
        _steps(list(rows), _Stamps([(o, t) for o, t in stamps]), replayed=mark is not None),
        mark.of if mark is not None else None,
        session.created_at,
        session.updated_at,
    )


class _Stamps:
    """When each visible item of a session was committed, by ordinal."""

    def __init__(self, rows: list[tuple[int, datetime]]) -> None:
        self._ordinals = [o for o, _ in rows]
        self._times = [t for _, t in rows]

    def before(self, ordinal: int) -> datetime | None:
        """The time of the item just before `ordinal` (None: it is the first)."""
        at = bisect_left(self._ordinals, ordinal)
        return self._times[at - 1] if at > 0 else None


def _seconds(stamps: _Stamps, reply: ItemRow, done: list[ItemRow]) -> float | None:
    began = stamps.before(reply.ordinal)
    if began is None:
        return None
    ended = max([reply.created_at, *(r.created_at for r in done)])
    return max((ended - began).total_seconds(), 0.0)


def _steps(rows: list[ItemRow], stamps: _Stamps, *, replayed: bool) -> tuple[Step, ...]:
    calls = {r.tool_call_id: r for r in rows if r.kind == ItemKind.TOOL_CALL}
    results: dict[str | None, ItemRow] = {}
    for row in rows:
        if row.kind == ItemKind.TOOL_RESULT:
            results[row.tool_call_id] = row  # the newest, when a call was settled again
    steps = []
    for reply in (r for r in rows if r.kind == ItemKind.ASSISTANT_MESSAGE):
        usage = reply.data.get("usage", {})
        asked, settled = [], []
        for entry in reply.data.get("tool_calls", []):
            call = calls.get(entry["id"])
            done = results.get(entry["id"])
            if done is not None:
                settled.append(done)
            asked.append(
                Call(
                    entry["id"],
                    call.tool_name or "" if call is not None else str(entry.get("name", "")),
                    dict(call.data.get("arguments", {})) if call is not None else {},
                    None if done is None else _result(done, replayed),
                )
            )
        taken, given = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        steps.append(
            Step(
                int(reply.data.get("step", 0)),
                reply.text,
                tuple(asked),
                taken + given,
                reply.data.get(SERVED_KEY) if replayed else None,
                reply.data.get(MISS_KEY),
                input_tokens=taken,
                output_tokens=given,
                key=reply.idempotency_key,
                seconds=_seconds(stamps, reply, settled),
            )
        )
    return tuple(steps)


def _result(row: ItemRow, replayed: bool) -> Result:
    artifact = row.data.get("artifact") if row.artifact_id is not None else None
    served = row.data.get(SERVED_KEY, "live") if replayed else None
    sha = str(artifact["sha256"]) if artifact else None
    return Result(sha, row.data.get("error_type"), served)
