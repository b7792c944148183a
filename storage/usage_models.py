"""Spend: each model reply's usage (model_usage), each session's running sums of it
(session_spend), and the admissions every model call, tool call and sub-agent passed
(admissions). Their SQL lives in storage/usage.py and storage/admissions.py.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from decimal import Decimal

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from durable_agents.storage.models import Base


class ModelUsageRow(Base):
    """One model reply's usage, under the reply's idempotency key (storage/usage.py).

    No foreign key to sessions: what was spent stays spent when a session is archived.
    """

    __tablename__ = "model_usage"
    __table_args__ = (
        CheckConstraint(
            "input_tokens >= 0 AND output_tokens >= 0 AND cached_tokens >= 0",
            name="ck_model_usage_tokens",
        ),
        Index("ix_model_usage_session", "tenant_id", "session_id"),
        Index("ix_model_usage_day", "tenant_id", "day"),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column()
    agent: Mapped[str] = mapped_column(Text)
    provider: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    # "chat" (a step of the loop) or "compaction" (a summary of the conversation).
    purpose: Mapped[str] = mapped_column(String(16), server_default="chat")
    # Input counts every prompt token, cached ones too; cached is the part read from a cache.
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cached_tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # The tool calls the reply asked for.
    tool_calls: Mapped[int] = mapped_column(Integer, server_default="0")
    # NULL: the model has no price in the worker's table (never a guess).
    cost_usd: Mapped[Decimal | None] = mapped_column(Numeric(20, 9))
    # The UTC day the reply committed: what per-day reads and quotas group by.
    day: Mapped[date] = mapped_column(Date)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class SessionSpendRow(Base):
    """A session's running sums: tokens and cost of model_usage (storage/usage.py), grown
    with each reply counted, and the tool calls and sub-agents admitted under it
    (storage/admissions.py): what a budget check reads."""

    __tablename__ = "session_spend"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(20, 9), server_default="0")
    unpriced_replies: Mapped[int] = mapped_column(Integer, server_default="0")
    tool_calls: Mapped[int] = mapped_column(Integer, server_default="0")
    sub_agents: Mapped[int] = mapped_column(Integer, server_default="0")


class AdmissionRow(Base):
    """One admission through the gate (storage/admissions.py), under the idempotency key of
    what it admitted: a retried or replayed call finds itself admitted. A model call holds a
    reservation (tokens, and their cost at the model's price) while `open`: the budget counts
    it until the reply is counted or the call fails, or `renewed_at` is older than the
    longest model call."""

    __tablename__ = "admissions"
    __table_args__ = (
        CheckConstraint("kind IN ('model', 'tool', 'sub_agent')", name="ck_admissions_kind"),
        CheckConstraint("reserved_tokens >= 0", name="ck_admissions_reserved"),
        Index(
            "ix_admissions_open",
            "tenant_id",
            "budget_session_id",
            postgresql_where=text("open"),
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    # Whose budget it counts against: the task's root session.
    budget_session_id: Mapped[uuid.UUID] = mapped_column()
    session_id: Mapped[uuid.UUID] = mapped_column()
    kind: Mapped[str] = mapped_column(String(16))
    reserved_tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # NULL: the model is unpriced, so the reservation's cost is unknown.
    reserved_cost_usd: Mapped[Decimal | None] = mapped_column(Numeric(20, 9))
    open: Mapped[bool] = mapped_column(Boolean, server_default="false")
    renewed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


# The tenant's side of spend (tenant_spend, and the quotas it is held to) lives with the
# quotas; imported here so whoever loads the spend tables (storage/migrations/env.py, the
# schema test) loads all of them.
from durable_agents.storage import quota_models as quota_models  # noqa: E402
