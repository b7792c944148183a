"""A stand-in for DNS (outside the system), injected as fetch_url's resolver."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class FakeDns:
    """Answers per host, one list per call (the last one repeats); records every question."""

    answers: dict[str, list[list[str]]]
    calls: list[str] = field(default_factory=list)

    async def __call__(self, host: str) -> Sequence[str]:
        self.calls.append(host)
        seq = self.answers[host.removesuffix(".")]  # as DNS: "x." and "x" are one name
        return seq[min(self.calls.count(host), len(seq)) - 1]


async def no_dns(host: str) -> Sequence[str]:
    """For URLs whose host is an IP literal: those must never be looked up."""
    raise AssertionError(f"{host!r} is an IP literal and must not be resolved")
