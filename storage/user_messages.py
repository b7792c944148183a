"""A user's text (the task, a follow-up) as a user_message item: inline when small, else as
an artifact with an inline preview, expanded by context assembly like a tool result.

Two halves, because the upload must finish before the transaction that refers to it:
`stage_user_text` uploads and verifies (outside any transaction), `user_message_item`
registers the artifact and its reference in the caller's unit of work. A crash in between
leaves at most an orphan object, which the collector sweeps.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifact_commit import artifact_info, register_uploaded
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.items import NewItem
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.previews import make_preview
from durable_agents.vocabulary.tokens import count_tokens, utf8_size

TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class StagedText:
    """What the item will hold: the whole text, or a preview of the uploaded artifact."""

    text: str
    ref: ArtifactRef | None = None
    content: bytes = b""


async def stage_user_text(
    store: ArtifactStore | None, tenant_id: str, text: str, inline_bytes: int
) -> StagedText:
    """Upload `text` if it is over `inline_bytes` (verified before this returns)."""
    if utf8_size(text) <= inline_bytes:
        return StagedText(text)
    if store is None:
        raise ValueError(
            f"a text of {utf8_size(text)} bytes is over the inline limit of {inline_bytes} "
            "bytes (AGENT_INLINE_MESSAGE_BYTES); storing it needs the artifact store"
        )
    content = text.encode("utf-8")
    ref = await store.put(tenant_id, content, TEXT_CONTENT_TYPE)
    return StagedText(make_preview(content, TEXT_CONTENT_TYPE), ref, content)


async def user_message_item(
    db: AsyncSession,
    store: ArtifactStore | None,
    staged: StagedText,
    *,
    tenant_id: str,
    session_id: uuid.UUID,
    idempotency_key: str,
) -> NewItem:
    """The user_message item for `staged`; registers its artifact (and the session's
    reference to it, needed for resume) in this unit of work."""
    artifact_id, data = await register_staged(
        db, store, staged, tenant_id=tenant_id, session_id=session_id
    )
    return NewItem(
        session_id=session_id,
        kind=ItemKind.USER_MESSAGE,
        role="user",
        idempotency_key=idempotency_key,
        text=staged.text,
        tokens=count_tokens(staged.text),
        data=data,
        artifact_id=artifact_id,
    )


async def register_staged(
    db: AsyncSession,
    store: ArtifactStore | None,
    staged: StagedText,
    *,
    tenant_id: str,
    session_id: uuid.UUID,
    with_key: bool = True,
) -> tuple[uuid.UUID | None, dict[str, object]]:
    """The artifact of `staged`, if it has one, registered in this unit of work with the
    session's reference to it (needed for resume): its id and the item data naming it."""
    if staged.ref is None or store is None:
        return None, {}
    artifact_id = await register_uploaded(db, store, staged.ref, staged.content)
    await ArtifactRepository(db, tenant_id).add_ref(
        artifact_id,
        owner_type="checkpoint",
        owner_id=str(session_id),
        required_for_resume=True,
    )
    return artifact_id, {"artifact": artifact_info(staged.ref, with_key=with_key)}
