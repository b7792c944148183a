"""What a model's tokens cost: a price table per provider and model, per million tokens.

A model missing from the table is unpriced: its cost is None, never a guess. No I/O here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from durable_agents.activities.providers.base import Usage

PerMillion = Annotated[Decimal, Field(ge=0, le=1_000_000)]
MILLION = Decimal(1_000_000)


class Price(BaseModel):
    """USD per million tokens. `cached`: input tokens read from the provider's prompt cache
    (default: the input price, so a missing figure never makes a reply look cheaper)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: PerMillion
    output: PerMillion
    cached: PerMillion | None = None


class PriceTable(BaseModel):
    """Prices by "provider/model" (e.g. "openai/gpt-4o-mini"); "provider/*" prices every
    model of a provider the table does not name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prices: dict[str, Price] = Field(default_factory=dict)

    def price_of(self, provider: str, model: str) -> Price | None:
        return self.prices.get(f"{provider}/{model}") or self.prices.get(f"{provider}/*")

    def cost(self, provider: str, model: str, usage: Usage) -> Decimal | None:
        """The reply's cost in USD, or None when the model is unpriced."""
        price = self.price_of(provider, model)
        if price is None:
            return None
        cached = min(usage.cached_tokens, usage.input_tokens)
        cached_price = price.input if price.cached is None else price.cached
        total = (
            (usage.input_tokens - cached) * price.input
            + cached * cached_price
            + usage.output_tokens * price.output
        )
        return total / MILLION
