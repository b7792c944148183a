"""Forking a session: a new session of the same tenant that shares its parent's committed
items up to a step by reference, then goes its own way.

The fork point of step STEP is the last item the parent committed before step STEP's model
reply: the fork shares every item up to it (the task, every earlier reply, call, decision
and result) and makes step STEP's model call itself. Sharing is two columns on the fork's
session row (storage/lineage.py); no item is copied, no artifact is copied, and no row of
the parent is written. The parent keeps its items and its refs on their artifacts for as
long as a fork shares them: archiving a session that has forks is refused
(storage/archive.py), so neither its rows nor, through its refs, its objects can go.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select

from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.errors import StorageError
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.user_messages import StagedText, user_message_item
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus


class NotForkable(StorageError):
    """The session cannot be forked at that step (no such step, archived, a sub-agent's);
    nothing was written."""

    error_type = "NotForkable"


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork of `parent` begins: step `step`, after the parent's item `forked_at`."""

    parent: SessionRow
    step: int
    forked_at: int


async def fork_point(st: AgentState, parent_id: uuid.UUID, step: int) -> ForkPoint:
    """The point before step `step`'s model reply in the session (SessionNotFound for another
    tenant's session; NotForkable for one that cannot be forked there)."""
    parent = await st.sessions.get(parent_id)
    # Held until the fork commits: an archive of the parent waits for it, then sees the fork.
    if await st.sessions.hold(parent_id) == SessionStatus.ARCHIVED:
        raise NotForkable(f"session {parent_id} is archived; restore it first")
    if parent.parent_id is not None:
        raise NotForkable(
            f"session {parent_id} is a sub-agent's; fork its task ({parent.root_id}) instead"
        )
    visible = await st.items.visible(parent_id)
    replies = select(ItemRow).where(visible, ItemRow.kind == ItemKind.ASSISTANT_MESSAGE)
    reply = await st.db.scalar(
        replies.where(ItemRow.data["step"].astext == str(step)).order_by(ItemRow.ordinal).limit(1)
    )
    if reply is None:
        steps = select(
            func.min(ItemRow.data["step"].as_integer()), func.max(ItemRow.data["step"].as_integer())
        ).where(visible, ItemRow.kind == ItemKind.ASSISTANT_MESSAGE)
        low, high = (await st.db.execute(steps)).one()
        has = "no model step yet" if low is None else f"steps {low} to {high}"
        raise NotForkable(f"session {parent_id} has no step {step} ({has})")
    return ForkPoint(parent, step, reply.ordinal - 1)


async def create_fork(
    st: AgentState,
    point: ForkPoint,
    fork_id: uuid.UUID,
    *,
    workflow_id: str,
    agent_definition: str,
    model_config: dict[str, object],
    approvals: dict[str, object] | None,
    instruction: StagedText | None = None,
    store: ArtifactStore | None = None,
    carried: Sequence[NewItem] = (),
    replay: dict[str, object] | None = None,
) -> SessionRow:
    """Write the fork's session row and its first own turn: with `instruction`, a user
    message after the fork point (it opens the turn); without, an empty turn there, so the
    fork's first step records the context config it runs with rather than its parent's.
    `carried`: the fork's own items before its step (storage/fork_edits.py), committed
    first, in its first turn. `replay`: the row's replay mark (storage/replays.py)."""
    parent = point.parent
    row = await st.sessions.create(
        fork_id,
        title=parent.title,
        model_config=dict(model_config),
        workflow_id=workflow_id,
        project=parent.project,
        agent_name=parent.agent_name,
        agent_definition=agent_definition,
        approvals=dict(approvals) if approvals is not None else None,
        task_check=parent.task_check,
        forked_from=parent.id,
        forked_at=point.forked_at,
        replay=replay,
    )
    if row.forked_from != parent.id or row.forked_at != point.forked_at:
        raise NotForkable(f"session {fork_id} exists already")
    if instruction is None or carried:
        await st.sessions.lock(fork_id)
        await st.turns.open(fork_id, point.forked_at + 1)
        await st.items.append_many(carried)
    if instruction is None:
        return row
    item = await user_message_item(
        st.db,
        store,
        instruction,
        tenant_id=st.tenant_id,
        session_id=fork_id,
        idempotency_key=f"{workflow_id}:fork",
    )
    await st.items.append(item)
    return row
