"""What one admission through the gate reads, in one statement (activities/policies/admission.py):
the budget's committed spend and its calls in flight, the tenant's spend quotas, frozen flag
and spend by day and month, and whether the admission asked for is recorded already.
TenantControls.step_figures runs it."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import text

from durable_agents.storage.quota_figures import Quotas


@dataclass(frozen=True)
class Spent:
    """Committed spend over a period; `cost_usd` None: some reply in it was unpriced."""

    tokens: int
    cost_usd: Decimal | None


@dataclass(frozen=True)
class StepFigures:
    """What one admission's checks read, in one round trip: the spend its budget counts
    (committed, and reserved by model calls in flight), the tenant's quotas (table figures
    only) and frozen flag, and its day and month."""

    session_tokens: int
    session_cost_usd: Decimal | None
    session_tool_calls: int
    quotas: Quotas
    frozen: bool
    day: Spent
    month: Spent
    session_sub_agents: int = 0
    # Held by the budget's model calls in flight (storage/admissions.py); cost None: some
    # of them are unpriced.
    reserved_tokens: int = 0
    reserved_cost_usd: Decimal | None = Decimal(0)
    # An admission recorded under the key asked about already stands (a retry, a replay).
    admitted: bool = False


# Every figure an admission is checked against, by primary key, one month's day rows (at
# most 31) and the budget's open reservations (its calls in flight): one statement per
# admission, however long the session or busy the tenant (bench/budget_check.py).
STEP_FIGURES = text(
    """
    SELECT s.tokens, s.cost_usd, s.unpriced_replies, s.tool_calls,
           c.tokens_per_day, c.cost_usd_per_day, c.tokens_per_month, c.cost_usd_per_month,
           COALESCE(c.frozen, false),
           d.tokens, d.cost_usd, d.unpriced_replies,
           m.tokens, m.cost_usd, m.unpriced_replies,
           s.sub_agents, r.tokens, r.cost_usd, r.unpriced,
           EXISTS (
             SELECT 1 FROM admissions AS a WHERE a.tenant_id = :tenant AND a.idempotency_key = :key
           )
      FROM (SELECT 1) AS one
      LEFT JOIN session_spend AS s ON s.tenant_id = :tenant AND s.session_id = :session
      LEFT JOIN tenant_controls AS c ON c.tenant_id = :tenant
      LEFT JOIN tenant_spend AS d ON d.tenant_id = :tenant AND d.day = :day
      CROSS JOIN LATERAL (
        SELECT SUM(tokens) AS tokens, SUM(cost_usd) AS cost_usd,
               SUM(unpriced_replies) AS unpriced_replies
          FROM tenant_spend WHERE tenant_id = :tenant AND day >= :month AND day <= :day
      ) AS m
      CROSS JOIN LATERAL (
        SELECT SUM(reserved_tokens) AS tokens, SUM(reserved_cost_usd) AS cost_usd,
               COUNT(*) FILTER (WHERE reserved_cost_usd IS NULL) AS unpriced
          FROM admissions
         WHERE tenant_id = :tenant AND budget_session_id = :session AND open
           AND renewed_at > now() - make_interval(secs => :ttl)
      ) AS r
    """
)
