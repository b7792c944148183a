"""Session repository: all SQL on `sessions`, scoped to one tenant. Never commits."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import Table, and_, bindparam, func, literal, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.models import SessionRow
from durable_agents.storage.turns import LATEST_TURN_ID
from durable_agents.storage.workspaces import validate_project
from durable_agents.vocabulary.session_status import SessionStatus

# The statements every step runs (a status write, the lock and the ordinals of each append)
# are built once and bound per call: built per call, SQLAlchemy's expression building and
# ORM bookkeeping cost more worker CPU than the round trip itself (`bench/statement_cpu.py`:
# a status write 836 -> ~420 us, an append 3.1 -> 1.8 ms). They run on the table, not
# through the ORM: no loaded SessionRow is refreshed by them.
_SESSIONS: Table = SessionRow.__table__  # type: ignore[assignment]
_THIS_SESSION = and_(
    _SESSIONS.c.id == bindparam("in_session"), _SESSIONS.c.tenant_id == bindparam("in_tenant")
)
_FIND = select(SessionRow).where(
    SessionRow.id == bindparam("in_session"), SessionRow.tenant_id == bindparam("in_tenant")
)
_LOCK = select(_SESSIONS.c.status).where(_THIS_SESSION).with_for_update()
_SET_STATUS = (
    update(_SESSIONS)
    .where(_THIS_SESSION)
    .values(
        status=bindparam("to_status"),
        updated_at=func.now(),
        wait_detail=None,
        checked=bindparam("to_checked"),
    )
)
_SET_STATUS_AND_RUN = _SET_STATUS.values(workflow_run_id=bindparam("to_run_id"))
_TAKE_ORDINALS = (
    update(_SESSIONS)
    .where(_THIS_SESSION)
    .values(next_ordinal=_SESSIONS.c.next_ordinal + bindparam("count"), updated_at=func.now())
)
_TAKE = _TAKE_ORDINALS.returning(_SESSIONS.c.next_ordinal - bindparam("count"), literal(None))
_TAKE_WITH_TURN = _TAKE_ORDINALS.returning(
    _SESSIONS.c.next_ordinal - bindparam("count"), LATEST_TURN_ID
)


async def session_id_taken(db: AsyncSession, session_id: uuid.UUID) -> bool:
    """Whether any tenant's session holds `session_id` (ids are unique across tenants). Says
    nothing else of that session: for refusing a start that would reuse the id."""
    found = await db.scalar(select(SessionRow.id).where(SessionRow.id == session_id))
    return found is not None


class SessionRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def create(
        self,
        session_id: uuid.UUID,
        *,
        title: str,
        model_config: dict[str, Any],
        workflow_id: str | None = None,
        parent_id: uuid.UUID | None = None,
        agent_name: str = "agent",
        project: str | None = None,
        agent_definition: str = "default",
        approvals: dict[str, Any] | None = None,
        workflow_run_id: str | None = None,
        task_check: dict[str, Any] | None = None,
        forked_from: uuid.UUID | None = None,
        forked_at: int | None = None,
        replay: dict[str, Any] | None = None,
    ) -> SessionRow:
        """Create the session, or return it unchanged if this id already exists for the tenant.

        A child session (a sub-agent's) names its parent and shares the parent's root,
        project (so its tools see the same workspace), agent definition and approvals.
        `workflow_run_id`: the run creating it, so a later run can tell its own retry from
        a session that existed before it. `task_check`: the check its start declared.
        A fork (storage/forks.py) names the session whose items it shares up to ordinal
        `forked_at`; its own ordinals start after that; a replay (storage/replays.py) is
        such a fork, marked with `replay`.
        """
        root_id = session_id
        if project is not None:
            validate_project(project)
        if parent_id is not None:
            parent = await self.get(parent_id)
            root_id = parent.root_id or parent.id
            project = parent.project
            agent_definition = parent.agent_definition
            approvals = parent.approvals
        # Session ids name Temporal workflows, which are not per tenant: an id another
        # tenant holds is refused as missing, as the id-only key refused it before 0023.
        held = await self._db.scalar(
            select(SessionRow.tenant_id).where(
                SessionRow.id == session_id, SessionRow.tenant_id != self._tenant
            )
        )
        if held is not None:
            raise SessionNotFound(f"session {session_id} not found")
        stmt = (
            insert(SessionRow)
            .values(
                id=session_id,
                tenant_id=self._tenant,
                title=title,
                status=SessionStatus.CREATED,
                model_config_json=model_config,
                workflow_id=workflow_id,
                workflow_run_id=workflow_run_id,
                approvals=approvals,
                task_check=task_check,
                next_ordinal=1 if forked_at is None else forked_at + 1,
                forked_from=forked_from,
                forked_at=forked_at,
                replay=replay,
                parent_id=parent_id,
                root_id=root_id,
                agent_name=agent_name,
                agent_definition=agent_definition,
                project=project,
            )
            .on_conflict_do_nothing(index_elements=[SessionRow.tenant_id, SessionRow.id])
        )
        await self._db.execute(stmt)
        return await self.get(session_id)

    async def find(self, session_id: uuid.UUID) -> SessionRow | None:
        row: SessionRow | None = await self._db.scalar(
            _FIND, {"in_session": session_id, "in_tenant": self._tenant}
        )
        return row

    async def get(self, session_id: uuid.UUID) -> SessionRow:
        row = await self.find(session_id)
        if row is None:
            raise SessionNotFound(f"session {session_id} not found")
        return row

    async def recent(self, *, limit: int = 50) -> list[SessionRow]:
        rows = await self._db.scalars(
            select(SessionRow)
            .where(SessionRow.tenant_id == self._tenant)
            .order_by(SessionRow.created_at.desc())
            .limit(limit)
        )
        return list(rows)

    async def listing(
        self, *, limit: int, before: uuid.UUID | None = None, status: str | None = None
    ) -> list[SessionRow]:
        """A page of the tenant's sessions, newest first, starting after session `before`
        (keyset paging: stable while new sessions arrive); optionally of one status."""
        stmt = select(SessionRow).where(SessionRow.tenant_id == self._tenant)
        if status is not None:
            stmt = stmt.where(SessionRow.status == status)
        if before is not None:
            anchor = await self.get(before)
            stmt = stmt.where(
                tuple_(SessionRow.created_at, SessionRow.id) < (anchor.created_at, anchor.id)
            )
        stmt = stmt.order_by(SessionRow.created_at.desc(), SessionRow.id.desc()).limit(limit)
        return list(await self._db.scalars(stmt))

    async def waiting_or_quiet(self, *, limit: int, quiet_for: timedelta) -> list[SessionRow]:
        """The tenant's sessions waiting for approval, then the running ones whose row
        (status, items) has not changed for `quiet_for`; each newest first, in one read."""
        waiting = SessionRow.status == SessionStatus.WAITING_APPROVAL
        quiet = and_(
            SessionRow.status == SessionStatus.RUNNING,
            SessionRow.updated_at < func.now() - quiet_for,
        )
        stmt = (
            select(SessionRow)
            .where(SessionRow.tenant_id == self._tenant, or_(waiting, quiet))
            .order_by(waiting.desc(), SessionRow.created_at.desc(), SessionRow.id.desc())
            .limit(limit)
        )
        return list(await self._db.scalars(stmt))

    async def tree(self, root_id: uuid.UUID) -> list[SessionRow]:
        """Every session under `root_id` (itself included), oldest first."""
        rows = await self._db.scalars(
            select(SessionRow)
            .where(SessionRow.root_id == root_id, SessionRow.tenant_id == self._tenant)
            .order_by(SessionRow.created_at, SessionRow.id)
        )
        return list(rows)

    async def forks(self, session_id: uuid.UUID) -> list[uuid.UUID]:
        """The ids of the sessions forked from this one, oldest first."""
        rows = await self._db.scalars(
            select(SessionRow.id)
            .where(SessionRow.forked_from == session_id, SessionRow.tenant_id == self._tenant)
            .order_by(SessionRow.created_at, SessionRow.id)
        )
        return list(rows)

    async def children(self, session_id: uuid.UUID) -> list[SessionRow]:
        rows = await self._db.scalars(
            select(SessionRow)
            .where(SessionRow.parent_id == session_id, SessionRow.tenant_id == self._tenant)
            .order_by(SessionRow.created_at, SessionRow.id)
        )
        return list(rows)

    async def set_status(
        self,
        session_id: uuid.UUID,
        status: str,
        *,
        workflow_run_id: str | None = None,
        checked: bool | None = None,
    ) -> None:
        """`checked`: with `completed`, whether a check passed on the answer (False: the
        session completed unchecked); any other status clears it."""
        if status not in SessionStatus.__members__.values():
            raise ValueError(f"unknown session status {status!r}")
        params: dict[str, Any] = {
            "in_session": session_id,
            "in_tenant": self._tenant,
            "to_status": status,
            "to_checked": checked if status == SessionStatus.COMPLETED else None,
        }
        if workflow_run_id:
            params["to_run_id"] = workflow_run_id
        result = await self._db.execute(
            _SET_STATUS_AND_RUN if workflow_run_id else _SET_STATUS, params
        )
        if result.rowcount == 0:  # type: ignore[attr-defined]
            raise SessionNotFound(f"session {session_id} not found")

    async def set_waiting_model(self, session_id: uuid.UUID, detail: dict[str, Any]) -> bool:
        """Mark a running session as waiting on its model, with `detail`. A session the loop
        has moved on (cancelled, failed, waiting for a person) keeps its status: False."""
        return await self._move(
            session_id,
            (SessionStatus.RUNNING, SessionStatus.WAITING_MODEL),
            SessionStatus.WAITING_MODEL,
            detail=detail,
        )

    async def clear_waiting_model(self, session_id: uuid.UUID) -> bool:
        """The model answered again: a session waiting on it is running (False if it was not)."""
        return await self._move(
            session_id, (SessionStatus.WAITING_MODEL,), SessionStatus.RUNNING, detail=None
        )

    async def _move(
        self,
        session_id: uuid.UUID,
        when: tuple[str, ...],
        status: str,
        *,
        detail: dict[str, Any] | None,
    ) -> bool:
        result = await self._db.execute(
            update(SessionRow)
            .where(
                SessionRow.id == session_id,
                SessionRow.tenant_id == self._tenant,
                SessionRow.status.in_(when),
            )
            .values(status=status, wait_detail=detail, updated_at=func.now())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def lock(self, session_id: uuid.UUID) -> str:
        """Lock the session row until the unit of work ends (this serialises appends);
        returns the session's status."""
        status = await self._db.scalar(_LOCK, {"in_session": session_id, "in_tenant": self._tenant})
        if status is None:
            raise SessionNotFound(f"session {session_id} not found")
        return str(status)

    async def hold(self, session_id: uuid.UUID) -> str:
        """Keep the session from being archived or deleted until the unit of work ends (FOR
        KEY SHARE: appends and status writes go on); returns its status."""
        status = await self._db.scalar(
            select(SessionRow.status)
            .where(SessionRow.id == session_id, SessionRow.tenant_id == self._tenant)
            .with_for_update(read=True, key_share=True)
        )
        if status is None:
            raise SessionNotFound(f"session {session_id} not found")
        return str(status)

    async def take_ordinals(
        self, session_id: uuid.UUID, count: int, *, latest_turn: bool = False
    ) -> tuple[int, uuid.UUID | None]:
        """Hand out `count` consecutive item ordinals: the first, and with `latest_turn` the
        id of the session's latest turn as read by the same statement (saves a round trip;
        else None).

        The row lock this takes is held until the unit of work ends, so appends to one
        session are serialised and ordinals never collide. Under READ COMMITTED the turn is
        read in the snapshot the statement began with: a turn that committed while this
        statement waited for the row lock is not seen (a separate read after the lock would
        see it)."""
        if count < 1:
            raise ValueError(f"count must be positive, got {count}")
        row = (
            await self._db.execute(
                _TAKE_WITH_TURN if latest_turn else _TAKE,
                {"in_session": session_id, "in_tenant": self._tenant, "count": count},
            )
        ).one_or_none()
        if row is None:
            raise SessionNotFound(f"session {session_id} not found")
        return int(row[0]), row[1]
