"""SQLAlchemy models for AgentState. The migration in storage/migrations is the source of truth
for the schema; these mappings must match it (a test compares them)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


# Item kinds and session statuses: durable_agents/vocabulary/ (item_kinds.py, session_status.py).
OWNER_TYPES = ("checkpoint", "trajectory", "business_output")
_SESSION_KEY = ["sessions.tenant_id", "sessions.id"]


class SessionRow(Base):
    __tablename__ = "sessions"
    __table_args__ = (
        # Tenant-leading keys: AgentState distributes by tenant_id.
        PrimaryKeyConstraint("tenant_id", "id", name="sessions_pkey"),
        ForeignKeyConstraint(["tenant_id", "parent_id"], _SESSION_KEY, name="fk_sessions_parent"),
        ForeignKeyConstraint(["tenant_id", "root_id"], _SESSION_KEY, name="fk_sessions_root"),
        ForeignKeyConstraint(
            ["tenant_id", "forked_from"], _SESSION_KEY, name="fk_sessions_forked_from"
        ),
        Index("ix_sessions_parent", "tenant_id", "parent_id"),
        Index("ix_sessions_forked_from", "tenant_id", "forked_from"),  # archive: has it forks?
        Index("ix_sessions_root", "tenant_id", "root_id"),
        # Not unique: only durable_agents.storage.sessions.session_id_taken reads by id alone.
        Index("ix_sessions_id", "id"),
    )

    id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(String(128), index=True)
    title: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32))
    model_config_json: Mapped[dict[str, Any]] = mapped_column("model_config", JSONB)
    workflow_id: Mapped[str | None] = mapped_column(String(256))
    workflow_run_id: Mapped[str | None] = mapped_column(String(256))
    parent_id: Mapped[uuid.UUID | None] = mapped_column()
    root_id: Mapped[uuid.UUID | None] = mapped_column()
    agent_name: Mapped[str] = mapped_column(Text, server_default="agent")
    # The agent definition the session runs (a sub-agent runs its parent's): the worker
    # resolves its instructions, model and tools by this name.
    agent_definition: Mapped[str] = mapped_column(Text, server_default="default")
    # Names the shared workspace under AGENT_WORKSPACE_SCOPE=project (storage.workspaces).
    project: Mapped[str | None] = mapped_column(Text)
    # Set while the session's workspace is packed in object storage (a gzip tar artifact)
    # instead of on disk: by archive, cleared when a restore puts it back.
    workspace_sha256: Mapped[str | None] = mapped_column(Text)
    workspace_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # While status is waiting_model: the provider's redacted error, the attempt and the next
    # try (activities/model_wait.py writes it; any other status clears it).
    wait_detail: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The task's approvals: {"policies": tool -> policy (each adds approvals), "loosened":
    # tool -> policy replacing the agent's, "loosened_by": who did}. NULL before 0016.
    approvals: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The check its start declared ({"files": [...], "contains": {path: [text, ...]}}), run
    # with its agent's own before an answer is accepted (activities/checks); NULL: none.
    task_check: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Once completed: True when a check passed on its answer, False when it had no check
    # (completed unchecked); NULL before it completes.
    checked: Mapped[bool | None] = mapped_column()
    # A fork: the session whose items it shares, and the last of their ordinals it shares
    # (storage/lineage.py); its own items continue after it. NULL for any other session.
    forked_from: Mapped[uuid.UUID | None] = mapped_column()
    forked_at: Mapped[int | None] = mapped_column(BigInteger)
    # A replay of its fork parent (storage/replays.py): {"of": id, "live_tools": [...]}.
    replay: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Next ordinal to hand out; the row lock taken to bump it serialises appends per session.
    next_ordinal: Mapped[int] = mapped_column(BigInteger, default=1)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ItemRow(Base):
    __tablename__ = "items"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "id", name="items_pkey"),
        UniqueConstraint("tenant_id", "session_id", "ordinal", name="uq_items_session_ordinal"),
        # Only a tool call's items can match a lookup by call, tenant first.
        Index(
            "ix_items_session_tool_call",
            "tenant_id",
            "session_id",
            "tool_call_id",
            postgresql_where=text("tool_call_id IS NOT NULL"),
        ),
        # Unique per tenant on a 16-byte hash of the key, not the key's text, led by the
        # tenant.
        Index(
            "ux_items_key_hash",
            text("tenant_id"),
            func.item_key_hash(text("tenant_id"), text("idempotency_key")),
            unique=True,
        ),
        ForeignKeyConstraint(["tenant_id", "session_id"], _SESSION_KEY, name="fk_items_session"),
        ForeignKeyConstraint(
            ["tenant_id", "turn_id"], ["turns.tenant_id", "turns.id"], name="fk_items_turn"
        ),
        ForeignKeyConstraint(
            ["tenant_id", "artifact_id"],
            ["agent_artifacts.tenant_id", "agent_artifacts.artifact_id"],
            name="fk_items_artifact",
        ),
        # Who still names an artifact: archive's check and the foreign key's.
        Index(
            "ix_items_artifact",
            "tenant_id",
            "artifact_id",
            postgresql_where=text("artifact_id IS NOT NULL"),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[uuid.UUID] = mapped_column()
    ordinal: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(32))
    role: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text, default="")
    tool_call_id: Mapped[str | None] = mapped_column(String(128))
    tool_name: Mapped[str | None] = mapped_column(String(128))
    data: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    idempotency_key: Mapped[str] = mapped_column(String(512))
    artifact_id: Mapped[uuid.UUID | None] = mapped_column()
    turn_id: Mapped[uuid.UUID | None] = mapped_column()
    # Token count of the persisted text, so a reader can pick a window without re-tokenising.
    tokens: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ArtifactRow(Base):
    """One object in the store (seed 000's agent_artifacts)."""

    __tablename__ = "agent_artifacts"
    __table_args__ = (
        UniqueConstraint("tenant_id", "sha256", name="uq_artifacts_tenant_sha"),
        Index(
            "ix_artifacts_unreachable",
            "unreachable_since",
            postgresql_where=text("status = 'unreachable'"),
        ),
    )

    artifact_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text)
    # Never written: the location is derived (ArtifactStore.uri).
    uri: Mapped[str | None] = mapped_column(Text)
    content_type: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    schema_version: Mapped[int] = mapped_column(Integer)
    # active | unreachable (marked by GC; swept after the safety window)
    status: Mapped[str] = mapped_column(Text)
    unreachable_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ArtifactRefRow(Base):
    """Who holds an artifact and for how long (seed 000's agent_artifact_refs)."""

    __tablename__ = "agent_artifact_refs"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "artifact_id"],
            ["agent_artifacts.tenant_id", "agent_artifacts.artifact_id"],
            name="fk_refs_artifact",
        ),
        Index("ix_artifact_refs_artifact", "tenant_id", "artifact_id"),
        # The claim check's holds (storage/claim_holds.py).
        Index(
            "ix_artifact_refs_history_holds",
            "tenant_id",
            "owner_id",
            "expires_at",
            postgresql_where=text("owner_type = 'workflow_history'"),
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_type: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_id: Mapped[str] = mapped_column(Text, primary_key=True)
    artifact_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    required_for_resume: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ContextBlobRow(Base):
    """A system prompt or tool schema set, stored once per tenant by sha256."""

    __tablename__ = "context_blobs"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ContextConfigRow(Base):
    """What a turn used: model, provider, prompt version, tool schema set, budget."""

    __tablename__ = "context_configs"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "id", name="context_configs_pkey"),
        UniqueConstraint("tenant_id", "sha256", name="uq_context_configs_tenant_sha"),
    )

    id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(Text)
    provider: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    system_prompt_sha256: Mapped[str] = mapped_column(Text)
    tool_schemas_sha256: Mapped[str] = mapped_column(Text)
    budget: Mapped[dict[str, Any]] = mapped_column(JSONB)
    # The agent definition's name, fingerprint and approval policies ({} before agents).
    agent: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TurnRow(Base):
    """The items of one user request, and the context configuration it ran with."""

    __tablename__ = "turns"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "id", name="turns_pkey"),
        ForeignKeyConstraint(["tenant_id", "session_id"], _SESSION_KEY, name="fk_turns_session"),
        ForeignKeyConstraint(
            ["tenant_id", "context_config_id"],
            ["context_configs.tenant_id", "context_configs.id"],
            name="fk_turns_config",
        ),
        UniqueConstraint("tenant_id", "session_id", "turn_no", name="uq_turns_session_no"),
    )

    id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(Text)
    session_id: Mapped[uuid.UUID] = mapped_column()
    turn_no: Mapped[int] = mapped_column(Integer)
    first_ordinal: Mapped[int] = mapped_column(BigInteger)
    context_config_id: Mapped[uuid.UUID | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class CompactionRow(Base):
    """A versioned summary of a session's items up to an ordinal; raw items stay."""

    __tablename__ = "compactions"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "id", name="compactions_pkey"),
        ForeignKeyConstraint(
            ["tenant_id", "session_id"], _SESSION_KEY, name="fk_compactions_session"
        ),
        ForeignKeyConstraint(
            ["tenant_id", "previous_compaction_id"],
            ["compactions.tenant_id", "compactions.id"],
            name="fk_compactions_previous",
        ),
        UniqueConstraint(
            "tenant_id", "session_id", "version", name="uq_compactions_session_version"
        ),
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_compactions_idempotency_key"),
    )

    id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(Text)
    session_id: Mapped[uuid.UUID] = mapped_column()
    version: Mapped[int] = mapped_column(Integer)
    previous_compaction_id: Mapped[uuid.UUID | None] = mapped_column()
    covers_through_ordinal: Mapped[int] = mapped_column(BigInteger)
    summary: Mapped[str] = mapped_column(Text)
    summary_tokens: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class MemoryRow(Base):
    """A remembered fact, scoped to tenant + (user | project | agent)."""

    __tablename__ = "memories"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "id", name="memories_pkey"),
        ForeignKeyConstraint(
            ["tenant_id", "supersedes_id"],
            ["memories.tenant_id", "memories.id"],
            name="fk_memories_supersedes",
        ),
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_memories_idempotency_key"),
        Index(
            "ix_memories_scope_live",
            "tenant_id",
            "scope_type",
            "scope_id",
            "created_at",
            postgresql_where=text("deleted_at IS NULL"),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(Text)
    scope_type: Mapped[str] = mapped_column(Text)
    scope_id: Mapped[str] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    source: Mapped[dict[str, Any]] = mapped_column(JSONB)
    version: Mapped[int] = mapped_column(Integer, server_default="1")
    created_by: Mapped[str] = mapped_column(Text)
    supersedes_id: Mapped[uuid.UUID | None] = mapped_column()
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    idempotency_key: Mapped[str | None] = mapped_column(String(512))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class SessionArchiveRow(Base):
    """A session moved to the cold tier: one compressed snapshot in object storage."""

    __tablename__ = "session_archives"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "session_id"], _SESSION_KEY, name="fk_archives_session"),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    snapshot_key: Mapped[str] = mapped_column(Text)
    snapshot_sha256: Mapped[str] = mapped_column(Text)
    snapshot_bytes: Mapped[int] = mapped_column(BigInteger)
    item_count: Mapped[int] = mapped_column(Integer)
    archived_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class ToolEffectRow(Base):
    """One effectful tool call under its idempotency key: whether it may have acted.

    No foreign key to sessions: the ledger outlives the hot rows an archive removes (the
    row says an effect happened; that stays true).
    """

    __tablename__ = "tool_effects"
    __table_args__ = (Index("ix_tool_effects_session", "tenant_id", "session_id"),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column()
    tool_call_id: Mapped[str] = mapped_column(String(128))
    tool_name: Mapped[str] = mapped_column(String(128))
    # durable_agents.storage.tool_effects.EffectState (a check constraint holds the same strings).
    state: Mapped[str] = mapped_column(String(16))
    # How many activity attempts claimed the row: more than one means one was interrupted.
    attempt: Mapped[int] = mapped_column(Integer, server_default="1")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    settled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ApiKeyRow(Base):
    """A gateway API key: its tenant, user and scopes; only the sha256 of its secret."""

    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_tenant", "tenant_id"),)

    key_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text, server_default="")
    # durable_agents.storage.api_keys.SCOPES, as a JSON list.
    scopes: Mapped[list[str]] = mapped_column(JSONB)
    secret_sha256: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Set on a device key: it speaks for this device of the tenant, on the device routes only.
    device_id: Mapped[str | None] = mapped_column(Text)
