"""Rate limits shared by every process that reaches AgentState: one row per (limiter,
subject) holding a GCRA "theoretical arrival time", taken in one atomic statement.

GCRA is a token bucket kept as a single number: `tat` is when the bucket would be full
again. A request at time `now` is allowed when `max(tat, now) + T <= now + burst * T`
(T = 1 / rate), and then moves `tat` on by T; a refused request changes nothing. A row
whose `tat` has passed is a full bucket, so deleting it loses nothing (`sweep`).

Time is the database's (`statement_timestamp()`), so gateways whose clocks disagree still
share one bucket. The table is UNLOGGED: nothing is written to the WAL, so a take commits
without waiting for a flush; a crash or a failover empties it, which only refills every
bucket. No index but the primary key: `tat` changes on every take, and an index on it
would turn each take's HOT update into an index write.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Boolean, Double, Text, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from durable_agents.storage.models import Base

# Floating-point slack in the comparison: burst * T summed as n steps of T must not refuse
# the burst's last request over a rounding error.
_SLACK_SECONDS = 1e-6


class RateLimitRow(Base):
    """One bucket (the migration makes the table UNLOGGED)."""

    __tablename__ = "rate_limits"
    __table_args__ = {"prefixes": ["UNLOGGED"]}

    # What is limited ("gateway_key", ...) and whose bucket it is (an API key's id).
    limiter: Mapped[str] = mapped_column(Text, primary_key=True)
    subject: Mapped[str] = mapped_column(Text, primary_key=True)
    # Epoch seconds (database clock) at which the bucket is full again.
    tat: Mapped[float] = mapped_column(Double)
    # Whether the latest take was allowed (RETURNING sees only the new row).
    allowed: Mapped[bool] = mapped_column(Boolean)


_NOW = "extract(epoch FROM statement_timestamp())"
_NEXT = f"greatest(r.tat, {_NOW}) + :interval"
_FITS = f"{_NEXT} <= {_NOW} + :window"
_TAKE = text(
    f"""
    INSERT INTO rate_limits AS r (limiter, subject, tat, allowed)
    VALUES (:limiter, :subject, {_NOW} + :interval, true)
    ON CONFLICT (limiter, subject) DO UPDATE SET
        allowed = {_FITS},
        tat = CASE WHEN {_FITS} THEN {_NEXT} ELSE r.tat END
    RETURNING allowed, tat - {_NOW} AS ahead
    """
)
_SWEEP = text(f"DELETE FROM rate_limits WHERE tat < {_NOW}")


@dataclass(frozen=True)
class Take:
    allowed: bool
    # Seconds until a request would be allowed (0.0 when this one was).
    retry_after: float


async def take(
    db: AsyncSession | AsyncConnection,
    limiter: str,
    subject: str,
    *,
    rate_per_second: float,
    burst: int,
) -> Take:
    """Spend one request of `subject`'s bucket, atomically across every process. Commits
    nothing itself: run it in an autocommit session (durable_agents.storage.db.autocommit)."""
    if rate_per_second <= 0 or burst < 1:
        raise ValueError("the rate must be > 0 and the burst >= 1")
    interval = 1.0 / rate_per_second
    result = await db.execute(
        _TAKE,
        {
            "limiter": limiter,
            "subject": subject,
            "interval": interval,
            "window": burst * interval + _SLACK_SECONDS,
        },
    )
    allowed, ahead = result.one()
    if allowed:
        return Take(True, 0.0)
    # Refused: the request fits once max(tat, now) + T <= now + burst * T.
    return Take(False, max(0.0, float(ahead) - (burst - 1) * interval))


async def sweep(db: AsyncSession | AsyncConnection) -> int:
    """Delete full buckets (their time has passed); how many went. Lossless under races:
    READ COMMITTED re-checks the condition on a row a take just moved on, and a take that
    waited for the delete inserts a fresh bucket, which is what the deleted row was."""
    result = await db.execute(_SWEEP)
    return int(result.rowcount)  # type: ignore[attr-defined]
