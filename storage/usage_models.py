"""Spend: each model reply's usage (model_usage) and each session's running sums of it
(session_spend). Their SQL lives in storage/usage.py.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from decimal import Decimal

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Date,
    DateTime,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    func,
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
    """A session's running sums of model_usage (storage/usage.py), grown with each reply
    counted: what a budget check reads."""

    __tablename__ = "session_spend"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(20, 9), server_default="0")
    unpriced_replies: Mapped[int] = mapped_column(Integer, server_default="0")
    tool_calls: Mapped[int] = mapped_column(Integer, server_default="0")


# The tenant's side of spend (tenant_spend, and the quotas it is held to) lives with the
# quotas; imported here so whoever loads the spend tables (storage/migrations/env.py, the
# schema test) loads all of them.
from durable_agents.storage import quota_models as quota_models  # noqa: E402
