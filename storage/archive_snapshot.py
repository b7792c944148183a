"""The cold-tier snapshot: every column of a session's hot rows as deterministic, gzipped JSON,
and the reads, deletes and inserts that move those rows.

Uuids and timestamps are strings; everything else is stored as read, so a restore reproduces
the same ids, ordinals, timestamps and data.
"""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Table, Uuid, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.errors import SessionNotFound, StorageError
from durable_agents.storage.models import ArtifactRow, Base, SessionRow

# 2: the snapshot also lists the artifacts its items name ("artifacts"), whose rows and
# refs leave PostgreSQL with the session (storage/archive_artifacts.py). 1 still restores.
SNAPSHOT_SCHEMA_VERSION = 2
_READABLE = (1, SNAPSHOT_SCHEMA_VERSION)
# What the snapshot keeps of each artifact row: enough to put it back as it was.
ARTIFACT_COLUMNS = ("artifact_id", "sha256", "content_type", "size_bytes", "schema_version",
                    "created_at")  # fmt: skip
SNAPSHOT_CONTENT_TYPE = "application/gzip"
TABLES = Base.metadata.tables
# Restore order: items reference turns, a compaction references its previous version.
# Deletion runs in reverse.
HOT: tuple[tuple[str, Table, str], ...] = (
    ("turns", TABLES["turns"], "turn_no"),
    ("compactions", TABLES["compactions"], "version"),
    ("items", TABLES["items"], "ordinal"),
)


class SnapshotInvalid(StorageError):
    """A snapshot that verifies against its sha256 but does not describe this session."""

    error_type = "SnapshotInvalid"


def _encode(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def decode(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in table.columns:
        if col.name not in row:
            continue  # archived before the column was added: its default stands
        value = row[col.name]
        if value is not None and isinstance(col.type, Uuid):
            value = uuid.UUID(value)
        elif value is not None and isinstance(col.type, DateTime):
            value = datetime.fromisoformat(value)
        out[col.name] = value
    return out


async def read_snapshot(db: AsyncSession, tenant_id: str, session_id: uuid.UUID) -> dict[str, Any]:
    """Everything archive moves, as JSON-ready dicts of every column."""
    s = TABLES["sessions"]
    found = await db.execute(select(s).where(s.c.id == session_id, s.c.tenant_id == tenant_id))
    session = found.mappings().one_or_none()
    if session is None:
        raise SessionNotFound(f"session {session_id} not found")
    snap: dict[str, Any] = {
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
        "tenant_id": tenant_id,
        "session_id": str(session_id),
        "session": {k: _encode(v) for k, v in session.items()},
    }
    for name, table, order in HOT:
        rows = await db.execute(
            select(table)
            .where(table.c.session_id == session_id, table.c.tenant_id == tenant_id)
            .order_by(table.c[order])
        )
        snap[name] = [{k: _encode(v) for k, v in r.items()} for r in rows.mappings()]
    r = TABLES["agent_artifact_refs"]
    refs = await db.execute(
        select(r)
        .where(r.c.tenant_id == tenant_id, r.c.owner_id == str(session_id))
        .order_by(r.c.owner_type, r.c.artifact_id)
    )
    # For the record: what the session held when it was archived.
    snap["artifact_refs"] = [{k: _encode(v) for k, v in m.items()} for m in refs.mappings()]
    snap["artifacts"] = await _artifact_rows(db, tenant_id, snap["items"])
    return snap


async def _artifact_rows(
    db: AsyncSession, tenant_id: str, items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    wanted = sorted({uuid.UUID(i["artifact_id"]) for i in items if i["artifact_id"]})
    if not wanted:
        return []
    a = TABLES["agent_artifacts"]
    rows = await db.execute(
        select(*(a.c[c] for c in ARTIFACT_COLUMNS))
        .where(a.c.tenant_id == tenant_id, a.c.artifact_id.in_(wanted))
        .order_by(a.c.artifact_id)
    )
    return [{k: _encode(v) for k, v in r.items()} for r in rows.mappings()]


def listed_artifacts(snap: dict[str, Any]) -> frozenset[str]:
    """The sha256 of every artifact the snapshot lists (none before schema 2: those
    sessions kept a ref per artifact in PostgreSQL instead)."""
    return frozenset(str(a["sha256"]) for a in snap.get("artifacts", ()))


def pack(snap: dict[str, Any]) -> bytes:
    # Sorted keys and mtime=0: the same session always gives the same bytes, so the same key.
    raw = json.dumps(snap, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return gzip.compress(raw.encode(), mtime=0)


def unpack(data: bytes, tenant_id: str, session_id: uuid.UUID) -> dict[str, Any]:
    snap: dict[str, Any] = json.loads(gzip.decompress(data))
    if snap.get("schema_version") not in _READABLE:
        raise SnapshotInvalid(f"unsupported snapshot schema {snap.get('schema_version')!r}")
    if snap.get("tenant_id") != tenant_id or snap.get("session_id") != str(session_id):
        raise SnapshotInvalid(f"snapshot does not belong to session {session_id}")
    return snap


async def delete_hot(db: AsyncSession, tenant_id: str, session_id: uuid.UUID) -> None:
    """Delete the session's hot rows, children first."""
    for _, table, _ in reversed(HOT):
        await db.execute(
            delete(table).where(table.c.session_id == session_id, table.c.tenant_id == tenant_id)
        )


async def restore_hot(
    db: AsyncSession, tenant_id: str, session_id: uuid.UUID, snap: dict[str, Any]
) -> str:
    """Re-insert the snapshot's rows as they were and put back the session's status,
    next ordinal and updated_at. The caller holds the session lock. Returns the status."""
    await _check_artifacts(db, tenant_id, snap["items"])
    for name, table, _ in HOT:
        if snap[name]:
            # executemany: SQLAlchemy batches it into few round trips, with a cached statement.
            await db.execute(insert(table), [decode(table, r) for r in snap[name]])
    prior = decode(TABLES["sessions"], snap["session"])
    await db.execute(
        update(SessionRow)
        .where(SessionRow.id == session_id, SessionRow.tenant_id == tenant_id)
        .values(
            status=prior["status"],
            next_ordinal=prior["next_ordinal"],
            updated_at=prior["updated_at"],
        )
    )
    return str(prior["status"])


async def _check_artifacts(db: AsyncSession, tenant_id: str, items: list[dict[str, Any]]) -> None:
    """Fail clearly, not with a foreign-key error, if an item's artifact was deleted."""
    wanted = {uuid.UUID(i["artifact_id"]) for i in items if i["artifact_id"]}
    if not wanted:
        return
    found = set(
        await db.scalars(
            select(ArtifactRow.artifact_id).where(
                ArtifactRow.tenant_id == tenant_id, ArtifactRow.artifact_id.in_(wanted)
            )
        )
    )
    if missing := wanted - found:
        raise StorageError(f"archived items reference deleted artifacts: {sorted(missing)}")
