"""ArtifactAccess for tools: stored artifacts of the call's tenant and session tree.

The tree is the call's session, its root and every session under that root (delegation makes
child sessions of one root). An artifact belongs to it when one of those sessions holds it
(a checkpoint ref). Anything else is "not found" in the same words as a missing artifact, so
the model cannot probe for another tenant's or another task's results.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncGenerator

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.tools.base import ArtifactInfo, ToolError
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.errors import ArtifactNotFound, SessionNotFound
from durable_agents.storage.models import ArtifactRow
from durable_agents.workflows.contracts import ArtifactRef

MIN_PREFIX_CHARS = 8
# A read without a length stops here: a tool that wants more pages through it.
MAX_READ_BYTES = 16 * 1024 * 1024
# An ambiguous prefix lists at most this many of the tree's own candidates.
_MAX_CANDIDATES = 5
_HEX = re.compile(r"^[0-9a-f]{8,64}$")


def _not_found(artifact: str) -> ToolError:
    shown = artifact if len(artifact) <= 80 else artifact[:80] + "..."
    return ToolError(
        "ArtifactNotFound",
        f"no artifact {shown!r} in this task; name one by its artifact id or by at least "
        f"{MIN_PREFIX_CHARS} hex characters of its sha256",
    )


class SqlArtifactAccess:
    """ArtifactAccess for one tool call: its tenant and the tree of its session."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        tenant_id: str,
        session_id: uuid.UUID,
    ) -> None:
        self._sessions = sessions
        self._store = store
        self._tenant = tenant_id
        self._session = session_id

    async def _rows(self, artifact: str, limit: int) -> list[ArtifactRow]:
        wanted = artifact.strip().lower()
        by_id: uuid.UUID | None = None
        prefix: str | None = None
        try:
            by_id = uuid.UUID(wanted)
        except ValueError:
            if not _HEX.fullmatch(wanted):
                raise _not_found(artifact) from None
            prefix = wanted
        async with agent_state(self._sessions, self._tenant) as st:
            try:
                session = await st.sessions.get(self._session)
            except SessionNotFound:
                raise _not_found(artifact) from None
            root = session.root_id or session.id
            return await st.artifacts.in_tree(
                root, artifact_id=by_id, sha256_prefix=prefix, limit=limit
            )

    async def _row(self, artifact: str) -> ArtifactRow:
        rows = await self._rows(artifact, _MAX_CANDIDATES + 1)
        if not rows:
            raise _not_found(artifact)
        if len(rows) > 1:
            # Only this tree's artifacts are ever candidates: naming them leaks nothing.
            shown = ", ".join(r.sha256 for r in rows[:_MAX_CANDIDATES])
            more = " and more" if len(rows) > _MAX_CANDIDATES else ""
            raise ToolError(
                "AmbiguousArtifact",
                f"sha256 prefix {artifact.strip()[:64]!r} names several artifacts of this task "
                f"({shown}{more}); give more characters",
            )
        return rows[0]

    def _ref(self, row: ArtifactRow) -> ArtifactRef:
        return self._store.ref_for(self._tenant, row.sha256, row.size_bytes, row.content_type)

    async def find(self, artifact: str) -> ArtifactInfo:
        """The artifact's metadata, if this tenant's session tree holds it."""
        row = await self._row(artifact)
        return ArtifactInfo(str(row.artifact_id), row.sha256, row.size_bytes, row.content_type)

    async def read(self, artifact: str, offset: int = 0, length: int | None = None) -> bytes:
        """Up to `length` bytes from `offset` (a ranged read: the rest is never fetched)."""
        if offset < 0 or (length is not None and length < 0):
            raise ToolError("InvalidArguments", "offset and length must not be negative")
        row = await self._row(artifact)
        if length is None:
            length = min(row.size_bytes - offset, MAX_READ_BYTES)
        end = min(offset + length, row.size_bytes) - 1
        if offset >= row.size_bytes or end < offset:
            return b""
        try:
            return await self._store.get_range(self._tenant, self._ref(row), offset, end)
        except ArtifactNotFound:
            raise _not_found(artifact) from None  # its row outlived the object (swept)

    async def chunks(self, artifact: str) -> AsyncGenerator[bytes, None]:
        """The whole artifact in pieces; ArtifactIntegrityError after the last if corrupt."""
        row = await self._row(artifact)
        pieces = self._store.iter_chunks(self._tenant, self._ref(row))
        try:
            async for chunk in pieces:
                yield chunk
        except ArtifactNotFound:
            raise _not_found(artifact) from None
        finally:
            # A reader that stops early (a grep with enough matches) closes the S3 stream now.
            close = getattr(pieces, "aclose", None)
            if close is not None:
                await close()
