"""The device tables of AgentState: devices a tenant registered and the device calls the
gateway hands them (storage/devices.py, storage/device_calls.py). Registered on the models'
Base like every table; the migrations are the schema's source of truth."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from durable_agents.storage.models import Base


class DeviceRow(Base):
    """A device serving its tools on `device:{tenant}:{device_id}`; presence by heartbeat."""

    __tablename__ = "devices"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    device_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tools: Mapped[list[str]] = mapped_column(JSONB)
    # Specs of the MCP tools its device-local servers list (activities/tools/mcp_device.py).
    tool_specs: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB, nullable=True)
    registered_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    last_seen_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class DeviceCallRow(Base):
    """A device tool call handed to the gateway: the newest attempt's Temporal task token
    (completed asynchronously once the device's result is verified and committed) and the
    device's lease on it (storage/device_calls.py)."""

    __tablename__ = "device_calls"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "id", name="device_calls_pkey"),
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_device_calls_key"),
        CheckConstraint("state IN ('pending', 'leased', 'done')", name="ck_device_calls_state"),
        Index("ix_device_calls_device", "tenant_id", "device_id", "state"),
    )

    id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(Text)
    device_id: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str] = mapped_column(String(512))
    session_id: Mapped[uuid.UUID] = mapped_column()
    tool_call_id: Mapped[str] = mapped_column(String(128))
    tool_name: Mapped[str] = mapped_column(String(128))
    step: Mapped[int] = mapped_column(Integer)
    rerun: Mapped[int] = mapped_column(Integer, server_default="0")
    task_token: Mapped[bytes] = mapped_column(LargeBinary)
    attempt: Mapped[int] = mapped_column(Integer, server_default="1")
    state: Mapped[str] = mapped_column(String(16))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # How many times a device was handed the call: more than one means one went away mid-call.
    offers: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
