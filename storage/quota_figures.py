"""A tenant's quotas as figures (what `AGENT_TENANT_QUOTAS`, `agentctl quota set` and the
tenant_controls table hold): validated, bounded, and read over the deployment's defaults.
The checks against them are storage/quotas.py's."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Count = Annotated[int, Field(ge=0, le=2**40)]
Usd = Annotated[float, Field(ge=0, le=1e9)]


class Quotas(BaseModel):
    """A tenant's quotas; None: no limit on that figure (or, in the table: the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens_per_day: Count | None = None
    cost_usd_per_day: Usd | None = None
    tokens_per_month: Count | None = None
    cost_usd_per_month: Usd | None = None
    running_tasks: Count | None = None
    parked_tasks: Count | None = None
    starts_per_minute: Count | None = None

    def over(self, defaults: Quotas | None) -> Quotas:
        """These figures, each unset one taken from `defaults`."""
        if defaults is None:
            return self
        mine = self.model_dump(exclude_none=True)
        return Quotas(**{**defaults.model_dump(exclude_none=True), **mine})

    def spend_limited(self) -> bool:
        return any(getattr(self, n) is not None for n in SPEND_QUOTAS)


SPEND_QUOTAS = ("tokens_per_day", "cost_usd_per_day", "tokens_per_month", "cost_usd_per_month")
START_QUOTAS = ("running_tasks", "parked_tasks", "starts_per_minute")
