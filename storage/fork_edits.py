"""Edited tool results at a fork point: the fork's model reads another text in place of a
result its step reads, and shares everything else.

Step STEP reads the results of step STEP-1's calls. An edited result is replaced where it
stands: the fork point moves to just before the first result item an edit replaces, and the
fork commits, as its own first items, what its parent committed from there up to step
STEP's reply, in their order. An edited call's result is one item with the new text (inline,
or an artifact with a preview when large, as a user's text is: storage/user_messages.py); a
result of a call still pending at the fork point comes after the rest. Every other item is a
row of the fork with the same content, naming the same artifact (no object is copied; the
fork holds its own reference on it). So each call has exactly one result in the fork's
conversation, in the place of the original, for every reader (context assembly, `show`, the
page), and the parent's rows are read, never written.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from sqlalchemy import select

from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.forks import ForkPoint, NotForkable
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.storage.user_messages import StagedText, register_staged
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.tokens import count_tokens

# Marks a fork's own result whose text a person gave at the fork point.
EDITED_KEY = "edited"


@dataclass(frozen=True)
class ResultEdits:
    """A fork point moved for edited results: `point` (moved), the parent's items the fork
    carries from there (`carried`, in order) and the edited calls with their tools' names."""

    point: ForkPoint
    carried: tuple[ItemRow, ...]
    calls: Mapping[str, str | None]


async def result_edits(st: AgentState, point: ForkPoint, call_ids: Collection[str]) -> ResultEdits:
    """The fork point `point` moved to just before the first result of `call_ids`, each a
    call of step `point.step - 1`; NotForkable, naming that step's calls, when one is not."""
    sid, step = point.parent.id, point.step
    visible = await st.items.visible(sid)
    before = await st.db.scalar(
        select(ItemRow.ordinal)
        .where(
            visible,
            ItemRow.kind == ItemKind.ASSISTANT_MESSAGE,
            ItemRow.ordinal <= point.forked_at,
        )
        .order_by(ItemRow.ordinal.desc())
        .limit(1)
    )
    tail: list[ItemRow] = []
    if before is not None:
        tail = list(
            await st.db.scalars(
                select(ItemRow)
                .where(visible, ItemRow.ordinal > before, ItemRow.ordinal <= point.forked_at)
                .order_by(ItemRow.ordinal)
            )
        )
    names = {
        r.tool_call_id: r.tool_name for r in tail if r.kind == ItemKind.TOOL_CALL and r.tool_call_id
    }
    unknown = sorted(set(call_ids) - names.keys())
    if unknown:
        raise NotForkable(_not_read(sid, step, unknown, names))
    first = next(
        (r.ordinal for r in tail if r.kind == ItemKind.TOOL_RESULT and r.tool_call_id in call_ids),
        point.forked_at + 1,
    )
    carried = tuple(r for r in tail if r.ordinal >= first)
    calls = {c: names[c] for c in sorted(call_ids)}
    return ResultEdits(replace(point, forked_at=first - 1), carried, calls)


async def carried_items(
    st: AgentState,
    edits: ResultEdits,
    texts: Mapping[str, StagedText],
    *,
    fork_id: uuid.UUID,
    workflow_id: str,
    store: ArtifactStore | None,
) -> list[NewItem]:
    """The fork's own items before its step, `texts` (call id -> its edited text) in place
    of those calls' results; registers the artifacts they name, with the fork's references
    to them, in this unit of work."""
    placed: set[str] = set()
    out: list[NewItem] = []
    for row in edits.carried:
        cid = row.tool_call_id
        if row.kind == ItemKind.TOOL_RESULT and cid is not None and cid in edits.calls:
            if cid not in placed:
                placed.add(cid)
                out.append(await _edited(st, store, edits, fork_id, workflow_id, cid, texts[cid]))
            continue
        if row.artifact_id is not None:
            await st.artifacts.add_ref(
                row.artifact_id,
                owner_type="checkpoint",
                owner_id=str(fork_id),
                required_for_resume=True,
            )
        out.append(
            NewItem(
                session_id=fork_id,
                kind=row.kind,
                role=row.role,
                idempotency_key=f"{workflow_id}:fork:item:{row.ordinal}",
                text=row.text,
                tool_call_id=cid,
                tool_name=row.tool_name,
                data=dict(row.data),
                artifact_id=row.artifact_id,
                tokens=row.tokens,
            )
        )
    for cid in edits.calls:
        if cid not in placed:  # a call without a result at the fork point
            out.append(await _edited(st, store, edits, fork_id, workflow_id, cid, texts[cid]))
    return out


async def _edited(
    st: AgentState,
    store: ArtifactStore | None,
    edits: ResultEdits,
    fork_id: uuid.UUID,
    workflow_id: str,
    tool_call_id: str,
    staged: StagedText,
) -> NewItem:
    artifact_id, data = await register_staged(
        st.db, store, staged, tenant_id=st.tenant_id, session_id=fork_id, with_key=False
    )
    return NewItem(
        session_id=fork_id,
        kind=ItemKind.TOOL_RESULT,
        role="tool",
        idempotency_key=f"{workflow_id}:fork:result:{tool_call_id}",
        text=staged.text,
        tokens=count_tokens(staged.text),
        tool_call_id=tool_call_id,
        tool_name=edits.calls[tool_call_id],
        data={**data, "step": edits.point.step - 1, EDITED_KEY: True},
        artifact_id=artifact_id,
    )


def _not_read(
    sid: uuid.UUID, step: int, unknown: list[str], names: Mapping[str, str | None]
) -> str:
    which = ", ".join(unknown)
    if not names:
        why = "it is the task's first" if step == 0 else f"step {step - 1} called no tool"
        return f"step {step} of session {sid} reads no tool result to edit ({why}): {which}"
    return (
        f"step {step} of session {sid} reads no result of {which}: it reads the results "
        f"of step {step - 1}'s calls {', '.join(names)}"
    )
