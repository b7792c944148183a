"""A tool call's result in AgentState: one tool_result item, written one way by every writer
(run_tool, a delegation's report, a call that never ran, a rejected call).

The item holds the preview, never the full result: that lives in the verified artifact the
item refers to, which the session then needs for as long as it may resume.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifact_commit import artifact_info, register_uploaded
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.previews import error_preview, make_preview

# A leaf module (tiktoken only): the count every item writer stores, so readers can pick a
# context window from stored counts alone.
from durable_agents.vocabulary.tokens import count_tokens


@dataclass(frozen=True)
class VerifiedArtifact:
    """A result already uploaded and verified in the store (its ref), with its bytes: the
    bytes let the commit upload it again if a sweep removed it in between."""

    ref: ArtifactRef
    content: bytes


@dataclass(frozen=True)
class ToolResult:
    """What a call produced: a verified artifact, an error, or both (a failed delegation
    still reports what its child made)."""

    session_id: uuid.UUID
    tool_call_id: str
    tool_name: str
    step: int
    idempotency_key: str
    artifact: VerifiedArtifact | None = None
    error_type: str | None = None
    # Our own words about the error; the preview when there is no artifact.
    error: str = ""
    # More data for readers (a delegation's child session id); never our own keys.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.artifact is None and self.error_type is None:
            raise ValueError("a tool result needs an artifact or an error type")

    def preview(self) -> str:
        """The item's text: the artifact's preview, else the error."""
        if self.artifact is not None:
            return make_preview(self.artifact.content, self.artifact.ref.content_type)
        return error_preview(self.error_type or "", self.error)


async def commit_tool_result(
    db: AsyncSession,
    tenant_id: str,
    result: ToolResult,
    *,
    store: ArtifactStore | None = None,
) -> ItemRow:
    """Commit `result` once per idempotency key in this unit of work; returns the item (the
    first attempt's when one committed already). The artifact is registered with the
    session's checkpoint reference, so it lives as long as the session may resume; a result
    with an artifact needs the `store` it was verified in."""
    items = ItemRepository(db, tenant_id)
    done = await items.by_key(result.idempotency_key)
    if done is not None:
        return done  # an earlier attempt committed while this one ran
    data: dict[str, Any] = {**result.extra, "step": result.step}
    artifact_id: uuid.UUID | None = None
    if result.artifact is not None:
        if store is None:
            raise ValueError("committing a tool result with an artifact needs its store")
        ref = result.artifact.ref
        artifact_id = await register_uploaded(db, store, ref, result.artifact.content)
        await ArtifactRepository(db, tenant_id).add_ref(
            artifact_id,
            owner_type="checkpoint",
            owner_id=str(result.session_id),
            required_for_resume=True,
        )
        data["artifact"] = artifact_info(ref, with_key=False)
    if result.error_type is not None:
        data["error_type"] = result.error_type
    text = result.preview()
    row, _ = await items.append(
        NewItem(
            session_id=result.session_id,
            kind=ItemKind.TOOL_RESULT,
            role="tool",
            idempotency_key=result.idempotency_key,
            text=text,
            tokens=count_tokens(text),
            tool_call_id=result.tool_call_id,
            tool_name=result.tool_name,
            data=data,
            artifact_id=artifact_id,
        )
    )
    return row
