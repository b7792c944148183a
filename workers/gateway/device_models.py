"""Bodies of the device routes. Everything a device sends is untrusted input: names,
sizes, digests and content types are checked here before anything reads them. Each body
translates to or from what the dispatch speaks (workers/device_dispatch/payloads.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from durable_agents.activities.tools.base import Effect
from durable_agents.activities.tools.mcp_tools import MAX_MCP_NAME_CHARS
from durable_agents.storage.tool_effects import SETTLED, EffectState
from durable_agents.workers.client.http_bodies import Request
from durable_agents.workers.device_dispatch import payloads

SHA256_PATTERN = r"^[0-9a-f]{64}$"
# type/subtype with an optional parameter (charset=utf-8): what a preview may be told.
CONTENT_TYPE_PATTERN = (
    r"^[A-Za-z0-9.+-]{1,64}/[A-Za-z0-9.+-]{1,64}(; ?[A-Za-z0-9-]{1,32}=[A-Za-z0-9.-]{1,64})?$"
)
ERROR_TYPE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
MAX_TOOLS = 500
MAX_ERROR_CHARS = 4000
MAX_SERVER_CHARS = 64


class ToolSpecRecord(Request):
    """One device-local MCP tool as registered (McpToolInfo.record): these keys and no
    others, so nothing a device adds (a command, an environment) is ever stored."""

    server: str = Field(min_length=1, max_length=MAX_SERVER_CHARS)
    mcp_name: str = Field(min_length=1, max_length=MAX_MCP_NAME_CHARS)
    description: str | None = None
    parameters: dict[str, Any]
    effect: Effect


class DeviceRegistration(Request):
    tools: list[str] = Field(max_length=MAX_TOOLS, description="Tools the device serves.")
    tool_specs: list[ToolSpecRecord] | None = Field(
        None, max_length=MAX_TOOLS, description="Specs of its device-local MCP tools."
    )

    def spec_records(self) -> list[dict[str, Any]] | None:
        """The specs as stored (devices.tool_specs) and read back by the cloud."""
        if not self.tool_specs:
            return None
        return [spec.model_dump() for spec in self.tool_specs]


class DeviceIdentity(BaseModel):
    key_id: str
    tenant_id: str
    device_id: str


class UploadTarget(BaseModel):
    """A presigned PUT for exactly this call's result object; send `headers` with it (a
    checksum-bound target signs x-amz-checksum-sha256: other bytes are refused by S3)."""

    url: str
    method: Literal["PUT"] = "PUT"
    expires_in: int
    headers: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, target: payloads.UploadTarget) -> UploadTarget:
        return cls(url=target.url, expires_in=target.expires_in, headers=dict(target.headers))


class UploadRequest(Request):
    """What the device is about to upload: the target it gets is bound to this sha256."""

    sha256: str = Field(pattern=SHA256_PATTERN)
    # The lease the device holds (OfferedCall.lease): refused if no longer the current one.
    lease: int | None = Field(None, ge=1)


class OfferedCall(BaseModel):
    call_id: str
    # Stable across attempts: what an idempotent tool (an MCP server) dedupes on.
    idempotency_key: str
    tool: str
    arguments: dict[str, Any]
    agent: str
    step: int
    # True when a device was handed this call before (it went away mid-call): an
    # effectful tool reconciles before it runs again.
    offered_before: bool
    # Which lease the device holds; uploads and the completion name it (a newer offer of
    # the call, after this lease ran out or was released, makes it stale).
    lease: int
    lease_seconds: int
    upload: UploadTarget

    @classmethod
    def of(cls, offer: payloads.Offer) -> OfferedCall:
        return cls(
            call_id=offer.call_id,
            idempotency_key=offer.idempotency_key,
            tool=offer.tool,
            arguments=offer.arguments,
            agent=offer.agent,
            step=offer.step,
            offered_before=offer.offered_before,
            lease=offer.lease,
            lease_seconds=offer.lease_seconds,
            upload=UploadTarget.of(offer.upload),
        )


class ResultInfo(Request):
    size_bytes: int = Field(ge=0)
    sha256: str = Field(pattern=SHA256_PATTERN)
    content_type: str = Field("application/octet-stream", pattern=CONTENT_TYPE_PATTERN)


class ErrorInfo(Request):
    type: str = Field(pattern=ERROR_TYPE_PATTERN)
    message: str = Field("", max_length=MAX_ERROR_CHARS)


class Completion(Request):
    """Exactly one of `result` (uploaded to the call's target first) or `error`."""

    result: ResultInfo | None = None
    error: ErrorInfo | None = None
    # For an effectful tool: whether it acted (the effects contract), as a call settles.
    effect: EffectState | None = None
    # The lease it was done under (OfferedCall.lease); without it, the current lease is
    # taken, which must still be live either way.
    lease: int | None = Field(None, ge=1)

    @field_validator("effect")
    @classmethod
    def _settled(cls, effect: EffectState | None) -> EffectState | None:
        if effect is not None and effect not in SETTLED:
            raise ValueError(f"effect must be one of: {', '.join(SETTLED)}")
        return effect

    def completion(self) -> payloads.Completion:
        """As the dispatch takes it."""
        result = self.result
        error = self.error
        return payloads.Completion(
            result=None
            if result is None
            else payloads.ResultClaim(result.size_bytes, result.sha256, result.content_type),
            error=None if error is None else payloads.ReportedError(error.type, error.message),
            effect=self.effect,
            lease=self.lease,
        )


class CompletionAnswer(BaseModel):
    call_id: str
    status: Literal["committed", "already_committed"]
