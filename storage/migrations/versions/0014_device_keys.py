"""Device keys and device calls: a device holds a key scoped to (tenant, device id) and
reaches its calls only through the gateway.

api_keys.device_id: set on a device key (scopes ["device"]); such a key is refused on the
tenant routes, and a tenant key on the device routes.

device_calls: one row per device tool call (per idempotency key), handed over by the
cloud's run_tool on the device's queue. It keeps the Temporal task token of the newest
attempt (asynchronous completion), the device's lease on the call and how often it was
offered.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("device_id", sa.Text(), nullable=True))
    op.create_table(
        "device_calls",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("device_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tool_call_id", sa.String(128), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("rerun", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("task_token", sa.LargeBinary(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("offers", sa.Integer(), nullable=False, server_default="0"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name="uq_device_calls_key"),
        sa.CheckConstraint("state IN ('pending', 'leased', 'done')", name="ck_device_calls_state"),
    )
    op.create_index("ix_device_calls_device", "device_calls", ["tenant_id", "device_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_device_calls_device", table_name="device_calls")
    op.drop_table("device_calls")
    op.drop_column("api_keys", "device_id")
