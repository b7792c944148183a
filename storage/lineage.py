"""A session's lineage: which sessions' items it reads, and up to which ordinal.

A fork (sessions.forked_from, sessions.forked_at) reads the items of the session it was
forked from up to `forked_at`, and its own after that; a fork of a fork reads its
grandparent's up to the lesser of the two fork points, and so on. Its own ordinals start
after `forked_at`, so ordering by ordinal orders the whole conversation. No item is copied
or rewritten: the shared items stay the parent's rows. Any other session's lineage is
itself alone, and its reads are the plain per-session reads they always were.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import ColumnElement, SQLColumnExpression, and_, bindparam, inspect, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.models import SessionRow

# A cycle cannot be written (a fork's parent exists before it); this bounds a corrupt row.
MAX_DEPTH = 64

# Only the two lineage columns: a SessionRow loaded here would sit in the unit of work's
# identity map, and a later ORM read of the session would return it as it was then, not
# as a status update since has left it.
_FORK_POINT = select(SessionRow.forked_from, SessionRow.forked_at).where(
    SessionRow.id == bindparam("in_session"), SessionRow.tenant_id == bindparam("in_tenant")
)


@dataclass(frozen=True)
class Span:
    """The items of `session_id` a lineage reads: all of them (`through` None) or those up
    to ordinal `through`."""

    session_id: uuid.UUID
    through: int | None


@dataclass(frozen=True)
class Lineage:
    """The spans of a session's conversation, its own first."""

    spans: tuple[Span, ...]

    @property
    def forked(self) -> bool:
        return len(self.spans) > 1

    def visible(
        self, session_col: SQLColumnExpression[uuid.UUID], ordinal_col: SQLColumnExpression[int]
    ) -> ColumnElement[bool]:
        """The predicate on (session, ordinal) columns that holds for this lineage's items."""
        own, *shared = self.spans
        clauses: list[ColumnElement[bool]] = [session_col == own.session_id]
        for span in shared:
            clauses.append(and_(session_col == span.session_id, ordinal_col <= span.through))
        return clauses[0] if not shared else or_(*clauses)


async def load_lineage(db: AsyncSession, tenant_id: str, session_id: uuid.UUID) -> Lineage:
    """The session's lineage. A session this tenant does not hold is its own lineage (its
    reads find nothing, as they did before forks). Lineage columns never change once a
    session is created, so a row already loaded in `db` answers without a read."""
    spans = [Span(session_id, None)]
    point = await _fork_point(db, tenant_id, session_id)
    through: int | None = None
    while point is not None:
        if len(spans) > MAX_DEPTH:
            raise SessionNotFound(f"session {session_id}'s lineage is deeper than {MAX_DEPTH}")
        parent, forked_at = point
        through = forked_at if through is None else min(through, forked_at)
        spans.append(Span(parent, through))
        point = await _fork_point(db, tenant_id, parent)
    return Lineage(tuple(spans))


async def _fork_point(
    db: AsyncSession, tenant_id: str, session_id: uuid.UUID
) -> tuple[uuid.UUID, int] | None:
    """(forked_from, forked_at) of the session, or None when it is no fork (or not found)."""
    key = inspect(SessionRow).identity_key_from_primary_key((tenant_id, session_id))
    loaded = db.sync_session.identity_map.get(key)
    if loaded is not None and {"forked_from", "forked_at"} <= loaded.__dict__.keys():
        parent, at = loaded.forked_from, loaded.forked_at
    else:
        found = (
            await db.execute(_FORK_POINT, {"in_session": session_id, "in_tenant": tenant_id})
        ).one_or_none()
        if found is None:
            return None
        parent, at = found
    if parent is None or at is None:
        return None
    return parent, int(at)
