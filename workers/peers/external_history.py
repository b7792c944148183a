"""A conversation another SDK keeps (an OpenAI Agents SDK session, a pydantic-ai message
history), stored as the items of an AgentState session, so it shows wherever our own
sessions show (agentctl show/watch, the gateway, the web page) and outlives the process.

Each SDK item is one item row: its kind and text for our readers, and the SDK's own JSON in
`data["external"]`, given back as it was stored. Content goes where ours goes: a tool output
larger than TOOL_OUTPUT_INLINE_BYTES is uploaded as a verified, content-addressed artifact
(one object however often it is stored) and the row keeps a preview and the reference, as
our own tool results do (storage/tool_results.py); any other item whose JSON is larger than
ITEM_INLINE_BYTES, or holds a NUL (which PostgreSQL's jsonb refuses), is stored whole as an
artifact the same way. Objects are uploaded and verified before the rows naming them commit.

The tenant is the one this object was built for (the configuration, AGENT_TENANT_ID by
default), never a field of an item; an SDK session id names a session of that tenant only.
The SDK adapters: workers/peers/openai_agents_session.py, workers/peers/pydantic_ai_history.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.archive import ensure_hot
from durable_agents.storage.artifact_commit import artifact_info, register_uploaded
from durable_agents.storage.artifacts import ArtifactStore, check_user_tenant
from durable_agents.storage.errors import SessionArchived, SessionNotFound
from durable_agents.storage.external_items import EXTERNAL_PREFIX
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.previews import bounded, make_preview
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workers.peers.claim_check import ClaimCheckStore

TOOL_OUTPUT_INLINE_BYTES = 2048
ITEM_INLINE_BYTES = 16 * 1024
TEXT_TYPE = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"
# Persisted in every row this module writes: changing it strands those rows.
_NAMESPACE = uuid.UUID("5d6e1c8a-2f43-4b7e-9a51-0c3d9e6f7a21")
_FETCHES = 8


class NotExternalSession(ValueError):
    """The id names a session our own loop runs, not a conversation another SDK keeps."""


def session_uuid(tenant_id: str, session_key: str) -> uuid.UUID:
    """The AgentState id of SDK session `session_key`: the key itself when it is a UUID
    (a session `agentctl sessions` lists), else derived from the tenant and the key, so two
    tenants' "user-42" are two sessions."""
    try:
        return uuid.UUID(session_key)
    except ValueError:
        return uuid.uuid5(_NAMESPACE, f"{tenant_id}\x00{session_key}")


@dataclass(frozen=True)
class Entry:
    """One SDK item to store: how our readers see it, and the SDK's JSON of it."""

    kind: ItemKind
    role: str
    text: str
    payload: dict[str, Any]
    tool_call_id: str | None = None
    tool_name: str | None = None
    arguments: dict[str, Any] | None = None
    # The key of `payload` holding a tool's output: a large string there is the artifact.
    detach: str | None = None
    # More for the adapter to read back (how pydantic-ai parts group into messages).
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stored:
    """An entry as read back: the SDK's JSON exactly as stored, and the adapter's extra."""

    payload: dict[str, Any]
    extra: dict[str, Any]


@dataclass(frozen=True)
class _Prepared:
    entry: Entry
    row_payload: dict[str, Any] | None  # None: the whole payload is the artifact
    blob: bytes | None
    content_type: str = TEXT_TYPE


def _prepare(entry: Entry) -> _Prepared:
    payload = entry.payload
    if entry.detach is not None and isinstance(payload.get(entry.detach), str):
        value: str = payload[entry.detach]
        raw = value.encode("utf-8", "surrogatepass")
        rest = {k: v for k, v in payload.items() if k != entry.detach}
        if (len(raw) > TOOL_OUTPUT_INLINE_BYTES or "\x00" in value) and _inline(rest):
            return _Prepared(entry, rest, raw, TEXT_TYPE)
    if _inline(payload):
        return _Prepared(entry, payload, None)
    whole = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return _Prepared(entry, None, whole, JSON_TYPE)


def _inline(payload: dict[str, Any]) -> bool:
    text = json.dumps(payload)  # ASCII: a NUL anywhere shows as \u0000
    return len(text) <= ITEM_INLINE_BYTES and "\\u0000" not in text


def call_arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments as our readers show them (tool_call items' `data["arguments"]`):
    a JSON object's fields, else the raw value under "arguments"."""
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": raw}


def _clean(text: str) -> str:
    return text.replace("\x00", "\ufffd")


class ExternalHistory:
    """One SDK session of one tenant in AgentState. `store`: the S3 store and database
    sessions (shared with a ClaimCheckPlugin if there is one); opened from the environment
    when not given."""

    def __init__(
        self,
        session_key: str,
        *,
        tenant: str,
        sdk: str,
        store: ClaimCheckStore | None = None,
        title: str | None = None,
    ) -> None:
        self.tenant = check_user_tenant(tenant)
        self.id = session_uuid(self.tenant, session_key)
        self._sdk = sdk
        # Agent name and definition alike, so readers show it once.
        self._definition = EXTERNAL_PREFIX + sdk
        self._title = title or session_key
        self._store = store or ClaimCheckStore()
        self._owns_store = store is None
        self._known = False

    async def aclose(self) -> None:
        """Close the connections this object opened itself (none when given a store)."""
        if self._owns_store:
            await self._store.aclose()

    async def _check(self, st: AgentState, *, create: bool) -> bool:
        """Whether the session exists (with `create`, it does after this), refusing one
        that our own loop runs."""
        if self._known:
            return True
        row = await st.sessions.find(self.id)
        if row is None and create:
            row = await st.sessions.create(
                self.id,
                title=bounded(self._title, 200),
                model_config={},
                agent_name=self._definition,
                agent_definition=self._definition,
            )
        if row is None:
            return False
        if row.agent_definition != self._definition:
            raise NotExternalSession(
                f"session {self.id} is of agent {row.agent_definition!r}, "
                f"not a conversation {self._sdk} keeps"
            )
        self._known = True
        return True

    async def append(self, entries: Sequence[Entry]) -> None:
        """Store `entries` after the session's items, in order, in one transaction."""
        if not entries:
            return
        store, sessions = await self._store.open()
        prepared = [_prepare(e) for e in entries]
        # Upload and verify first: a row names only an object that exists.
        refs = await asyncio.gather(*(self._put(store, p) for p in prepared if p.blob is not None))
        try:
            kept = await self._commit(store, sessions, prepared, list(refs))
        except SessionArchived:  # the cold tier took it meanwhile: bring it back, once
            await ensure_hot(sessions, store, self.tenant, self.id)
            kept = await self._commit(store, sessions, prepared, list(refs))
        # The SDK reads the whole conversation before its next run: keep what it will read.
        for artifact_id, blob, content_type in kept:
            self._store.cache.keep(self.tenant, artifact_id, blob, content_type, complete=True)

    async def _put(self, store: ArtifactStore, prepared: _Prepared) -> ArtifactRef:
        assert prepared.blob is not None
        return await store.put(self.tenant, prepared.blob, prepared.content_type)

    async def _commit(
        self,
        store: ArtifactStore,
        sessions: async_sessionmaker[AsyncSession],
        prepared: list[_Prepared],
        refs: list[ArtifactRef],
    ) -> list[tuple[uuid.UUID, bytes, str]]:
        """Commit the rows; the artifacts they name, as (id, bytes, content type)."""
        kept: list[tuple[uuid.UUID, bytes, str]] = []
        async with agent_state(sessions, self.tenant, write=True) as st:
            await self._check(st, create=True)
            held, items = st.external, st.items
            pending = iter(refs)
            new: list[NewItem] = []
            names: dict[str, str] = {}
            for p in prepared:
                tool_name = p.entry.tool_name
                call_id = p.entry.tool_call_id
                if call_id and tool_name:
                    names[call_id] = tool_name
                elif call_id and p.entry.kind == ItemKind.TOOL_RESULT:
                    # An output names its call only by id: show the call's tool with it.
                    tool_name = names.get(call_id)
                    if tool_name is None:
                        call = await items.tool_call(self.id, call_id[:128])
                        tool_name = call.tool_name if call is not None else None
                data: dict[str, Any] = {}
                artifact_id: uuid.UUID | None = None
                text = _clean(p.entry.text)
                external: dict[str, Any] = {"sdk": self._sdk, **p.entry.extra}
                if p.blob is not None:
                    ref = next(pending)
                    artifact_id = await register_uploaded(st.db, store, ref, p.blob)
                    kept.append((artifact_id, p.blob, ref.content_type))
                    await held.hold(self.id, artifact_id)
                    data["artifact"] = artifact_info(ref, with_key=False)
                    if p.row_payload is None:
                        text = bounded(text)
                    else:
                        external["detached"] = p.entry.detach
                        text = make_preview(p.blob, ref.content_type)
                if p.row_payload is not None:
                    external["payload"] = p.row_payload
                    if p.entry.arguments is not None:
                        data["arguments"] = p.entry.arguments
                data["external"] = external
                new.append(
                    NewItem(
                        session_id=self.id,
                        kind=p.entry.kind,
                        role=p.entry.role[:16],
                        idempotency_key=f"external:{self.id}:{uuid.uuid4().hex}",
                        text=text,
                        tokens=count_tokens(text),
                        tool_call_id=(call_id or "")[:128] or None,
                        tool_name=(tool_name or "")[:128] or None,
                        data=data,
                        artifact_id=artifact_id,
                    )
                )
            await items.append_many(new)
        return kept

    async def load(self, limit: int | None = None) -> list[Stored]:
        """The session's entries in order (with `limit`, its newest `limit`); none when the
        session does not exist (for this tenant)."""
        store, sessions = await self._store.open()
        if limit is not None and limit <= 0:
            return []
        try:
            rows = await self._rows(sessions, limit)
        except SessionArchived:
            await ensure_hot(sessions, store, self.tenant, self.id)
            rows = await self._rows(sessions, limit)
        gate = asyncio.Semaphore(_FETCHES)
        return list(await asyncio.gather(*(self._read(store, gate, r) for r in rows)))

    async def _rows(
        self, sessions: async_sessionmaker[AsyncSession], limit: int | None
    ) -> list[ItemRow]:
        async with agent_state(sessions, self.tenant) as st:
            row = await st.sessions.find(self.id)
            if row is None:
                return []
            if row.status == "archived":
                raise SessionArchived(f"session {self.id} is archived")
            await self._check(st, create=False)
            if limit is None:
                return await st.items.page(self.id)
            return await st.external.newest(self.id, limit)

    async def _read(self, store: ArtifactStore, gate: asyncio.Semaphore, row: ItemRow) -> Stored:
        external = dict(row.data["external"])
        payload: dict[str, Any] | None = external.pop("payload", None)
        detached = external.pop("detached", None)
        external.pop("sdk", None)
        if row.artifact_id is None or (payload is not None and detached is None):
            return Stored(payload or {}, external)
        async with gate:
            content = await self._fetch(store, row)
        if payload is None:
            whole: dict[str, Any] = json.loads(content.decode("utf-8", "surrogatepass"))
            return Stored(whole, external)
        return Stored({**payload, detached: content.decode("utf-8", "surrogatepass")}, external)

    async def _fetch(self, store: ArtifactStore, row: ItemRow) -> bytes:
        assert row.artifact_id is not None
        info = row.data["artifact"]
        cached = self._store.cache.lookup(self.tenant, row.artifact_id, info["size_bytes"])
        if cached is not None:
            return cached[0]
        ref = store.ref_for(self.tenant, info["sha256"], info["size_bytes"], info["content_type"])
        content = await store.get(self.tenant, ref)
        self._store.cache.keep(
            self.tenant, row.artifact_id, content, ref.content_type, complete=True
        )
        return content

    async def pop(self) -> Stored | None:
        """Remove the newest entry and return it (None: there is none)."""
        store, sessions = await self._store.open()
        async with agent_state(sessions, self.tenant, write=True) as st:
            if not await self._check(st, create=False):
                return None
            try:
                row = await st.external.remove_last(self.id)
            except SessionNotFound:
                return None
            # Read inside the transaction: a failed read leaves the item where it was.
            return None if row is None else await self._read(store, asyncio.Semaphore(1), row)

    async def clear(self) -> None:
        """Remove every entry; the session stays, and later appends continue it."""
        _, sessions = await self._store.open()
        async with agent_state(sessions, self.tenant, write=True) as st:
            if await self._check(st, create=False):
                await st.external.remove_all(self.id)
