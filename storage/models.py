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
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


ITEM_KINDS = (
    "user_message",
    "assistant_message",
    "tool_call",
    "tool_result",
    "approval",
    "error",
)
SESSION_STATUSES = (
    "created",
    "running",
    "waiting_approval",
    "waiting_device",
    "completed",
    "failed",
    "cancelled",
)
OWNER_TYPES = ("checkpoint", "trajectory", "business_output")


class SessionRow(Base):
    __tablename__ = "sessions"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(128), index=True)
    title: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32))
    model_config_json: Mapped[dict[str, Any]] = mapped_column("model_config", JSONB)
    workflow_id: Mapped[str | None] = mapped_column(String(256))
    # Next ordinal to hand out; the row lock taken to bump it serialises appends per session.
    next_ordinal: Mapped[int] = mapped_column(BigInteger, default=1)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ItemRow(Base):
    __tablename__ = "items"
    __table_args__ = (
        UniqueConstraint("session_id", "ordinal", name="uq_items_session_ordinal"),
        Index("ix_items_session_tool_call", "session_id", "tool_call_id"),
        ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_items_session"),
        ForeignKeyConstraint(
            ["tenant_id", "artifact_id"],
            ["agent_artifacts.tenant_id", "agent_artifacts.artifact_id"],
            name="fk_items_artifact",
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[uuid.UUID] = mapped_column()
    ordinal: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(32))
    role: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text, default="")
    tool_call_id: Mapped[str | None] = mapped_column(String(128))
    tool_name: Mapped[str | None] = mapped_column(String(128))
    data: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    idempotency_key: Mapped[str] = mapped_column(String(512), unique=True)
    artifact_id: Mapped[uuid.UUID | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ArtifactRow(Base):
    """One object in the store (seed 000's agent_artifacts)."""

    __tablename__ = "agent_artifacts"
    __table_args__ = (UniqueConstraint("tenant_id", "sha256", name="uq_artifacts_tenant_sha"),)

    artifact_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text)
    uri: Mapped[str] = mapped_column(Text)
    content_type: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    schema_version: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(Text)
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
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_type: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_id: Mapped[str] = mapped_column(Text, primary_key=True)
    artifact_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    required_for_resume: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
