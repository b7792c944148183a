"""Memory repository: scoped, versioned facts on `memories`, one tenant at a time. Never commits.

A memory is never updated in place: superseding writes a new row (version + 1) and soft-deletes
the old one, so the chain of what was believed, and when, stays readable.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from sqlalchemy import func, literal, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from durable_agents.storage.errors import MemoryNotFound
from durable_agents.storage.models import MemoryRow

MEMORY_SCOPES = ("user", "project", "agent")
MEMORY_AUTHORS = ("agent", "user", "extractor")
MAX_CONTENT_CHARS = 4000
MAX_RECALL_LIMIT = 100
# Bounds the OR-chain a long query would otherwise turn into.
MAX_QUERY_WORDS = 16
# A supersede chain is acyclic by construction; this only bounds a corrupted one.
MAX_HISTORY = 1000
_LIKE_ESCAPE = "\\"


def escape_like(word: str) -> str:
    """Escape LIKE wildcards so the word matches literally (a query of '%' is not 'anything')."""
    return (
        word.replace(_LIKE_ESCAPE, _LIKE_ESCAPE * 2)
        .replace("%", _LIKE_ESCAPE + "%")
        .replace("_", _LIKE_ESCAPE + "_")
    )


def query_words(query: str | None) -> list[str]:
    """The distinct words of a query, in order, at most MAX_QUERY_WORDS of them."""
    words: list[str] = []
    for word in (query or "").split():
        if word.casefold() not in (w.casefold() for w in words):
            words.append(word)
    return words[:MAX_QUERY_WORDS]


def _check_scope(scope_type: str, scope_id: str) -> None:
    if scope_type not in MEMORY_SCOPES:
        raise ValueError(f"unknown memory scope {scope_type!r}; use one of {MEMORY_SCOPES}")
    if not scope_id:
        raise ValueError("memory scope_id must not be empty")


def _check_new(scope_type: str, scope_id: str, content: str, created_by: str) -> None:
    _check_scope(scope_type, scope_id)
    if created_by not in MEMORY_AUTHORS:
        raise ValueError(f"unknown memory author {created_by!r}; use one of {MEMORY_AUTHORS}")
    if not content.strip():
        raise ValueError("memory content must not be empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValueError(
            f"memory content is {len(content)} characters; at most {MAX_CONTENT_CHARS} allowed"
        )


class MemoryRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    def _stored_key(self, idempotency_key: str) -> str:
        # The key is unique per tenant (it once spanned all tenants, which
        # binding the tenant into the stored key answered). The fixed length always fits the
        # column however long the caller's key is, and keys stored before stay found.
        return hashlib.sha256(f"{self._tenant}\x00{idempotency_key}".encode()).hexdigest()

    async def _by_stored_key(self, stored_key: str) -> MemoryRow | None:
        return await self._db.scalar(
            select(MemoryRow).where(
                MemoryRow.idempotency_key == stored_key, MemoryRow.tenant_id == self._tenant
            )
        )

    async def _lock_live(
        self, memory_id: uuid.UUID, scope_type: str, scope_id: str
    ) -> MemoryRow | None:
        # FOR UPDATE re-checks deleted_at after waiting, so two concurrent supersedes of the
        # same memory cannot both win: the second sees it deleted.
        return await self._db.scalar(
            select(MemoryRow)
            .where(
                MemoryRow.id == memory_id,
                MemoryRow.tenant_id == self._tenant,
                MemoryRow.scope_type == scope_type,
                MemoryRow.scope_id == scope_id,
                MemoryRow.deleted_at.is_(None),
            )
            .with_for_update()
        )

    async def remember(
        self,
        scope_type: str,
        scope_id: str,
        content: str,
        *,
        source: dict[str, Any],
        created_by: str,
        idempotency_key: str | None = None,
        supersedes_id: uuid.UUID | None = None,
    ) -> MemoryRow:
        """Store a memory, once per idempotency key; optionally supersede a live one.

        A retried call with the same key returns the row the first attempt stored, even if
        that attempt is still in flight in another unit of work. Superseding requires the old
        memory to be live and in the same tenant and scope (MemoryNotFound otherwise); the new
        row gets the next version and the old one is soft-deleted in this unit of work.
        """
        _check_new(scope_type, scope_id, content, created_by)
        stored_key = None if idempotency_key is None else self._stored_key(idempotency_key)
        if stored_key is not None and (done := await self._by_stored_key(stored_key)):
            return done
        old: MemoryRow | None = None
        if supersedes_id is not None:
            old = await self._lock_live(supersedes_id, scope_type, scope_id)
            if old is None:
                # A concurrent attempt under the same key may have superseded it while we
                # waited for the lock; then that attempt's row is the answer, not an error.
                if stored_key is not None and (done := await self._by_stored_key(stored_key)):
                    return done
                raise MemoryNotFound(
                    f"memory {supersedes_id} not found in {scope_type}:{scope_id} "
                    "(missing, forgotten or already superseded)"
                )
        row: MemoryRow | None = await self._db.scalar(
            insert(MemoryRow)
            .values(
                id=uuid.uuid4(),
                tenant_id=self._tenant,
                scope_type=scope_type,
                scope_id=scope_id,
                content=content,
                source=source,
                version=1 if old is None else old.version + 1,
                created_by=created_by,
                supersedes_id=None if old is None else old.id,
                idempotency_key=stored_key,
            )
            # Waits for a concurrent insert of the same key, then yields to it if it committed.
            .on_conflict_do_nothing(constraint="uq_memories_idempotency_key")
            .returning(MemoryRow)
        )
        if row is None:
            assert stored_key is not None  # only a keyed insert can conflict
            done = await self._by_stored_key(stored_key)
            if done is None:
                raise MemoryNotFound("memory under this idempotency key vanished mid-insert")
            return done
        if old is not None:
            await self._db.execute(
                update(MemoryRow)
                .where(MemoryRow.tenant_id == self._tenant, MemoryRow.id == old.id)
                .values(deleted_at=func.now())
            )
        return row

    async def recall(
        self, scope_type: str, scope_id: str, *, query: str | None = None, limit: int = 10
    ) -> list[MemoryRow]:
        """Live memories of one scope, newest first; with a query, those containing any word.

        Words match case-insensitively as literal substrings. The scope filter and order ride
        the partial index ix_memories_scope_live; the word match filters along that scan.
        """
        _check_scope(scope_type, scope_id)
        if not 1 <= limit <= MAX_RECALL_LIMIT:
            raise ValueError(f"recall limit must be between 1 and {MAX_RECALL_LIMIT}")
        stmt = select(MemoryRow).where(
            MemoryRow.tenant_id == self._tenant,
            MemoryRow.scope_type == scope_type,
            MemoryRow.scope_id == scope_id,
            MemoryRow.deleted_at.is_(None),
        )
        words = query_words(query)
        if words:
            stmt = stmt.where(
                or_(
                    *(
                        MemoryRow.content.ilike(f"%{escape_like(w)}%", escape=_LIKE_ESCAPE)
                        for w in words
                    )
                )
            )
        # id breaks ties between memories written in one transaction (same now()).
        stmt = stmt.order_by(MemoryRow.created_at.desc(), MemoryRow.id.desc()).limit(limit)
        return list(await self._db.scalars(stmt))

    async def forget(self, memory_id: uuid.UUID) -> bool:
        """Soft-delete a live memory. False if missing, another tenant's, or already deleted."""
        forgotten = await self._db.scalar(
            update(MemoryRow)
            .where(
                MemoryRow.id == memory_id,
                MemoryRow.tenant_id == self._tenant,
                MemoryRow.deleted_at.is_(None),
            )
            .values(deleted_at=func.now())
            .returning(MemoryRow.id)
        )
        return forgotten is not None

    async def get(self, memory_id: uuid.UUID, *, include_deleted: bool = False) -> MemoryRow | None:
        """One memory of this tenant; deleted (forgotten or superseded) ones only on request."""
        stmt = select(MemoryRow).where(
            MemoryRow.id == memory_id, MemoryRow.tenant_id == self._tenant
        )
        if not include_deleted:
            stmt = stmt.where(MemoryRow.deleted_at.is_(None))
        return await self._db.scalar(stmt)

    async def history(self, memory_id: uuid.UUID) -> list[MemoryRow]:
        """The supersede chain ending at this memory: it first, then what it replaced, and so on.

        Empty if the memory is missing or another tenant's. Deleted versions are included.
        """
        start = (
            select(MemoryRow.id, MemoryRow.supersedes_id, literal(0).label("depth"))
            .where(MemoryRow.id == memory_id, MemoryRow.tenant_id == self._tenant)
            .cte("chain", recursive=True)
        )
        prev = aliased(MemoryRow)
        chain = start.union_all(
            select(prev.id, prev.supersedes_id, start.c.depth + 1).where(
                prev.id == start.c.supersedes_id,
                prev.tenant_id == self._tenant,
                start.c.depth < MAX_HISTORY,
            )
        )
        rows = await self._db.scalars(
            select(MemoryRow).join(chain, MemoryRow.id == chain.c.id).order_by(chain.c.depth)
        )
        return list(rows)
