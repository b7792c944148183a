"""What a tool run comes to, as the loop learns it: the ToolOutcome of a committed tool_result
item (ids and a ref, no content), and a failure described without its message."""

from __future__ import annotations

import errno

from durable_agents.activities.tools.effects import awaits_decision
from durable_agents.storage.artifacts import artifact_key
from durable_agents.storage.models import ItemRow
from durable_agents.workflows.contracts import ArtifactRef, ToolOutcome


def failure_words(exc: BaseException) -> str:
    """An exception described without its message: type, and errno name for OS errors."""
    code = getattr(exc, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    return f"{type(exc).__name__} ({name})" if name else type(exc).__name__


def outcome_of(row: ItemRow, tenant_id: str, store_prefix: str) -> ToolOutcome:
    """What the loop learns of a committed tool_result item (ids and ref, no content).
    `store_prefix` is the artifact store's key prefix: a result leaves its key to be
    derived, unless it was stored under another (then its data keeps that key)."""
    info = row.data.get("artifact")
    ref = None
    if info and row.artifact_id is not None:
        ref = ArtifactRef(
            tenant_id=tenant_id,
            sha256=info["sha256"],
            key=info.get("key") or artifact_key(store_prefix, tenant_id, info["sha256"]),
            size_bytes=int(info["size_bytes"]),
            content_type=info["content_type"],
            artifact_id=str(row.artifact_id),
        )
    return ToolOutcome(
        tool_call_id=row.tool_call_id or "",
        item_id=str(row.id),
        ordinal=row.ordinal,
        ref=ref,
        error_type=row.data.get("error_type"),
        in_doubt=awaits_decision(row),
        rerun=int(row.data.get("rerun", 0)),
        unchanged=bool(row.data.get("unchanged")),
    )
