"""A tenant's controls (quotas and the kill switch) and its spend per UTC day. Their SQL
lives in storage/quotas.py; the tenant's day row grows in storage/usage.py with each reply.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from sqlalchemy import BigInteger, Boolean, Date, DateTime, Index, Integer, Numeric, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from durable_agents.storage.models import Base, SessionRow


class TenantControlRow(Base):
    """A tenant's quotas (NULL: the settings' default, else unlimited) and whether it is
    frozen. No row: every quota from the settings, not frozen."""

    __tablename__ = "tenant_controls"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tokens_per_day: Mapped[int | None] = mapped_column(BigInteger)
    cost_usd_per_day: Mapped[Decimal | None] = mapped_column(Numeric(20, 9))
    tokens_per_month: Mapped[int | None] = mapped_column(BigInteger)
    cost_usd_per_month: Mapped[Decimal | None] = mapped_column(Numeric(20, 9))
    running_tasks: Mapped[int | None] = mapped_column(Integer)
    parked_tasks: Mapped[int | None] = mapped_column(Integer)
    starts_per_minute: Mapped[int | None] = mapped_column(Integer)
    frozen: Mapped[bool] = mapped_column(Boolean, server_default="false")
    # Who froze (or thawed) it last and when: the kill switch's audit.
    frozen_by: Mapped[str | None] = mapped_column(Text)
    frozen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_by: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TenantSpendRow(Base):
    """A tenant's running sums of model_usage for one UTC day (a month is its days):
    what a quota check reads, grown in each reply's transaction when its usage was counted."""

    __tablename__ = "tenant_spend"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(20, 9), server_default="0")
    unpriced_replies: Mapped[int] = mapped_column(Integer, server_default="0")


# The running- and parked-task counts a quota'd start reads: sessions by tenant and status.
# Declared here (it belongs to the quotas) on the sessions table; 0021 creates it.
SESSIONS_BY_STATUS = Index("ix_sessions_tenant_status", SessionRow.tenant_id, SessionRow.status)
