"""What a device is handed (a leased call and where to upload its result) and what it hands
back (its result's size and digest, or its error), as the dispatch speaks them. The
gateway's HTTP bodies (workers/gateway/device_models.py) check the wire format and
translate to and from these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from durable_agents.storage.tool_effects import EffectState


@dataclass(frozen=True)
class UploadTarget:
    """A presigned PUT for exactly this call's result object, sent with `headers`."""

    url: str
    expires_in: int
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Offer:
    """A call leased to a device."""

    call_id: str
    idempotency_key: str
    tool: str
    arguments: dict[str, Any]
    agent: str
    step: int
    offered_before: bool
    lease: int
    lease_seconds: int
    upload: UploadTarget


@dataclass(frozen=True)
class ResultClaim:
    """What the device says it uploaded."""

    size_bytes: int
    sha256: str
    content_type: str


@dataclass(frozen=True)
class ReportedError:
    type: str
    message: str


@dataclass(frozen=True)
class Completion:
    """Exactly one of `result` and `error`; `effect` for an effectful tool; `lease`: the
    lease it was done under (None: the current one, which must still be live)."""

    result: ResultClaim | None = None
    error: ReportedError | None = None
    effect: EffectState | None = None
    lease: int | None = None
