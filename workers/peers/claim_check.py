"""A content-addressed claim check for any Temporal client and worker (another SDK's agents).

Large strings inside JSON payloads (tool outputs, message contents) are uploaded once to the
artifact store under their sha256 (tenant-prefixed, zstd as every artifact: ArtifactStore.put,
which verifies the object before it returns a ref), held for the workflow whose history will
name them (storage/claim_holds.py), and only then replaced by a reference. Long lists (the
conversation a peer SDK sends with every model call) keep their leading groups of items as
content-addressed arrays (workers/peers/claim_check_tree.py). So a conversation that repeats every
earlier tool result in every model call stores each result once, and a model call's input
in history is a few KB however long the conversation: stored bytes O(N), history bounded.
Decoding fetches each reference through ArtifactStore.get (sha256 re-checked), with a
process-wide read cache, since the same results come back with every call. The size a
reference names is never trusted: it must match our own record of the object (the tenant's
artifact row, which the upload registered, or bytes read and verified before), and that
record bounds decoding, so a forged size costs nothing before it is refused.

Why a PayloadCodec and not the SDK's external-storage driver (DataConverter.external_storage,
which workers/process/payload_offload.py uses as a safety net for whole payloads over 256 KiB):
- A StorageDriver receives whole payloads over a size threshold and replaces each by one
  claim. A model call's input holds the whole conversation, so each call would store the
  whole conversation again: O(N^2) bytes (measured on the SDK's own claim check at 100 x 20 KB:
  103-109 MB of blobs for 2 MB of results). Only something that may rewrite a payload's
  bytes can store what repeats once and keep what is new; that is a codec.
- A codec learns the workflow a payload belongs to (WithSerializationContext: workflow id on
  the client, in the workflow worker and in activities), which the holds need; the payloads
  it writes are marked with their own encoding, so a client without the codec fails on an
  unknown encoding instead of handing references to user code as data.
- The codec runs before external storage, so the two compose: the safety net still catches
  a payload that is large for other reasons.
What a codec cannot know is the run id, so holds are per (namespace, workflow id); GC asks
the latest run (activities/history_holds.py), which is the conservative answer.

A payload with no workflow in its context (a client call outside any workflow) is left as
it is: nothing could hold its objects.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any, Self

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ActivitySerializationContext,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifact_cache import ArtifactReadCache
from durable_agents.storage.artifacts import ArtifactStore, check_user_tenant
from durable_agents.storage.claim_holds import Held, hold
from durable_agents.storage.errors import ArtifactNotFound, ArtifactRecordMismatch
from durable_agents.storage.models import ArtifactRow
from durable_agents.workers.peers import claim_check_tree as tree

# Persisted in every payload the codec rewrote: renaming either strands those histories.
ENCODING = b"binary/durable-agents-claim-check"
ORIGINAL_ENCODING = "durable-agents-claim-check-encoding"
_FORM = "durable-agents-claim-check-form"  # b"json": refs inside; b"whole": the data itself
WHOLE_TYPE = "application/vnd.temporal.payload-data"

DEFAULT_STRING_THRESHOLD = 4 * 1024
DEFAULT_OBJECT_THRESHOLD = 1024
DEFAULT_GROUP = 4
# Holds this process wrote recently are not written again (each model call repeats every
# earlier result). Far shorter than any namespace's retention (Temporal's minimum is a
# day), so a hold it skips is still live.
_HELD_TTL_SECONDS = 600.0
_HELD_MAX = 100_000
_CONCURRENCY = 16


class ClaimCheckStore:
    """The store and AgentState sessions the claim check writes to, shared by a client and
    its workers. Given both, the caller owns them; else they are opened from the
    environment (DATABASE_URL, S3_*) at first use and closed by `aclose`.

    `held_ttl_seconds`: how long a hold this process wrote is trusted without writing it
    again; it must stay far below the namespace's retention (the hold can only lapse after
    that), and tests that move the collector's clock past retention set it to 0."""

    def __init__(
        self,
        store: ArtifactStore | None = None,
        sessions: async_sessionmaker[AsyncSession] | None = None,
        *,
        read_cache_bytes: int = 64 * 1024 * 1024,
        held_ttl_seconds: float = _HELD_TTL_SECONDS,
    ) -> None:
        if (store is None) != (sessions is None):
            raise ValueError("give both store and sessions, or neither (opened from settings)")
        self._store, self._sessions = store, sessions
        self._lock = asyncio.Lock()
        self._stack: AsyncExitStack | None = None
        self.cache = ArtifactReadCache(read_cache_bytes)
        self._held: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._held_ttl = held_ttl_seconds

    async def open(self) -> tuple[ArtifactStore, async_sessionmaker[AsyncSession]]:
        if self._store is not None and self._sessions is not None:
            return self._store, self._sessions
        async with self._lock:
            if self._store is None or self._sessions is None:
                self._store, self._sessions = await self._open_from_settings()
        return self._store, self._sessions

    async def _open_from_settings(
        self,
    ) -> tuple[ArtifactStore, async_sessionmaker[AsyncSession]]:
        from durable_agents.storage.db import make_engine, make_session_factory
        from durable_agents.workers.resources import open_store
        from durable_agents.workers.settings import get_settings

        settings = get_settings()
        stack = AsyncExitStack()
        store = await stack.enter_async_context(open_store(settings.s3))
        engine = make_engine(settings.database.url.get_secret_value(), pool_size=4)
        stack.push_async_callback(engine.dispose)
        self._stack = stack
        return store, make_session_factory(engine)

    async def aclose(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            self._store = self._sessions = None
            await stack.aclose()

    def recently_held(self, tenant: str, owner: str, sha: str) -> bool:
        seen = self._held.get((tenant, owner, sha))
        return seen is not None and time.monotonic() - seen < self._held_ttl

    def note_held(self, tenant: str, owner: str, shas: Sequence[str]) -> None:
        now = time.monotonic()
        for sha in shas:
            self._held[(tenant, owner, sha)] = now
            self._held.move_to_end((tenant, owner, sha))
        while len(self._held) > _HELD_MAX:
            self._held.popitem(last=False)


def owner_of(context: SerializationContext | None) -> str | None:
    """The hold owner of a payload: "<namespace>/<workflow id>", or None outside a workflow.

    Namespace names cannot contain "/", so the first one splits them again."""
    if (
        isinstance(context, WorkflowSerializationContext | ActivitySerializationContext)
        and context.workflow_id
    ):
        return f"{context.namespace}/{context.workflow_id}"
    return None


class ClaimCheckCodec(PayloadCodec, WithSerializationContext):
    """Rewrites JSON payloads so large strings and long lists travel as references."""

    def __init__(
        self,
        store: ClaimCheckStore,
        tenant_id: str,
        *,
        string_threshold: int = DEFAULT_STRING_THRESHOLD,
        group: int = DEFAULT_GROUP,
        object_threshold: int = DEFAULT_OBJECT_THRESHOLD,
        context: SerializationContext | None = None,
    ) -> None:
        check_user_tenant(tenant_id)
        if string_threshold < 256:
            raise ValueError("string_threshold must be at least 256 bytes")
        if group < 2:
            raise ValueError("group must be at least 2")
        self.store, self.tenant_id = store, tenant_id
        self.string_threshold, self.group, self.object_threshold = (
            string_threshold,
            group,
            object_threshold,
        )
        self._owner = owner_of(context)

    def with_context(self, context: SerializationContext) -> Self:
        return type(self)(
            self.store,
            self.tenant_id,
            string_threshold=self.string_threshold,
            group=self.group,
            object_threshold=self.object_threshold,
            context=context,
        )

    # encoding

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        owner = self._owner
        if owner is None:
            return list(payloads)
        out: list[Payload] = []
        blobs: dict[str, tree.Blob] = {}
        for payload in payloads:
            rewritten = self._rewrite(payload, blobs)
            out.append(payload if rewritten is None else rewritten)
        if blobs:
            await self._upload_and_hold(owner, list(blobs.values()))
        return out

    def _rewrite(self, payload: Payload, blobs: dict[str, tree.Blob]) -> Payload | None:
        if len(payload.data) < min(self.string_threshold, self.object_threshold):
            return None
        encoding = payload.metadata.get("encoding", b"")
        if encoding == ENCODING:
            return None
        if encoding != b"json/plain":
            if len(payload.data) < self.string_threshold:
                return None
            blob = tree.Blob(hashlib.sha256(payload.data).hexdigest(), payload.data, WHOLE_TYPE)
            blobs.setdefault(blob.token, blob)
            return _marked(payload, tree.dumps(blob.token), b"whole")
        try:
            value = json.loads(payload.data)
        except ValueError:
            return None
        encoder = tree.Encoder(self.string_threshold, self.object_threshold, self.group)
        try:
            encoded = encoder.encode(value)
        except tree.MarkerCollision:
            return None
        if not encoder.blobs:
            return None
        blobs.update(encoder.blobs)
        return _marked(payload, tree.dumps(encoded), b"json")

    async def _upload_and_hold(self, owner: str, blobs: list[tree.Blob]) -> None:
        """Upload (verified by the store) and hold every blob before any ref leaves here."""
        tenant = self.tenant_id
        todo = [b for b in blobs if not self.store.recently_held(tenant, owner, b.sha256)]
        if not todo:
            return
        store, sessions = await self.store.open()
        limit = asyncio.Semaphore(_CONCURRENCY)

        async def put(blob: tree.Blob) -> Held:
            async with limit:
                ref = await store.put(tenant, blob.data, blob.content_type)
            if ref.sha256 != blob.sha256:
                raise ValueError("artifact store named a blob by another sha256")
            return Held(ref, blob.data)

        held = await asyncio.gather(*(put(b) for b in todo))
        async with agent_state(sessions, tenant, write=True) as st:
            await hold(st.db, store, held, owner)
        self.store.note_held(tenant, owner, [b.sha256 for b in todo])

    # decoding

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [await self._decode_one(p) for p in payloads]

    async def _decode_one(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        form = payload.metadata.get(_FORM)
        value = json.loads(payload.data)
        if form == b"whole":
            [data] = await self._fetch([value])
        elif form == b"json":
            data = tree.dumps(await self._restore(value))
        else:
            raise ValueError(f"unknown claim-check form {form!r}")
        restored = Payload()
        restored.CopyFrom(payload)
        restored.data = data
        restored.metadata["encoding"] = payload.metadata[ORIGINAL_ENCODING]
        del restored.metadata[ORIGINAL_ENCODING]
        del restored.metadata[_FORM]
        return restored

    async def _restore(self, value: Any) -> Any:
        strings: dict[str, str] = {}
        parsed: dict[str, Any] = {}
        while needed := tree.missing(value, strings, parsed):
            wanted = sorted(needed)
            fetched = await self._fetch([tok for _, tok in wanted])
            for (kind, tok), data in zip(wanted, fetched, strict=True):
                if kind == "s":
                    strings[tok] = data.decode()
                else:
                    parsed[tok] = json.loads(data)
        return tree.restore(value, strings, parsed)

    async def _fetch(self, toks: Sequence[object]) -> list[bytes]:
        """The bytes each reference names, in order.

        A reference's size is a claim from the payload: the size, and so the bound on
        decoding, come from our own record of the object (bytes read and verified before,
        else this tenant's artifact row). A reference that disagrees with the record, or
        names an object the tenant has no record of, is refused before anything is read.
        """
        named = [tree.parse_token(tok) for tok in toks]
        known: dict[str, bytes] = {}
        for sha, _ in named:
            cached = self.store.cache.whole(self.tenant_id, _cache_key(sha))
            if cached is not None:
                known[sha] = cached
        recorded = {sha: len(data) for sha, data in known.items()}
        store, sessions = await self.store.open()
        rows: dict[str, ArtifactRow] = {}
        if unread := {sha for sha, _ in named} - known.keys():
            async with agent_state(sessions, self.tenant_id) as st:
                rows = await st.artifacts.by_sha256(unread)
            for sha in unread:
                if sha not in rows:
                    # Another tenant's object is indistinguishable from a missing one.
                    raise ArtifactNotFound(f"artifact {sha} not found")
                recorded[sha] = rows[sha].size_bytes
        for sha, size in named:
            if size != recorded[sha]:
                raise ArtifactRecordMismatch(
                    f"a claim-check reference names artifact {sha} as {size} bytes; "
                    f"its record says {recorded[sha]}"
                )
        limit = asyncio.Semaphore(_CONCURRENCY)

        async def get(row: ArtifactRow) -> None:
            ref = store.ref_for(self.tenant_id, row.sha256, row.size_bytes, row.content_type)
            async with limit:
                data = await store.get(self.tenant_id, ref)  # decoding bounded by the record
            known[row.sha256] = data
            self.store.cache.keep(
                self.tenant_id, _cache_key(row.sha256), data, row.content_type, complete=True
            )

        await asyncio.gather(*(get(row) for row in rows.values()))
        return [known[sha] for sha, _ in named]


def _cache_key(sha: str) -> uuid.UUID:
    # The read cache is keyed by artifact ids; a sha256's first 128 bits name it as well.
    return uuid.UUID(hex=sha[:32])


def _marked(payload: Payload, data: bytes, form: bytes) -> Payload:
    out = Payload()
    out.CopyFrom(payload)
    out.data = data
    out.metadata[ORIGINAL_ENCODING] = payload.metadata.get("encoding", b"")
    out.metadata[_FORM] = form
    out.metadata["encoding"] = ENCODING
    return out
