"""ix_items_session_tool_call on (tenant_id, session_id, tool_call_id): a call's items are read
by tenant, session and call, and with the primary key tenant-leading since 0023 an index
without the tenant let the planner pick items_pkey (every item of the tenant, filtered) on
stale statistics, as a hash-partitioned run showed (tests/test_tool_call_index.py).

Online: the new index is built CONCURRENTLY under a temporary name (an INVALID leftover of an
interrupted build dropped first), the old one dropped CONCURRENTLY, the new one renamed (a
catalog change).

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

_NAME = "ix_items_session_tool_call"
_BUILDING = f"{_NAME}_0025"


def _rebuild(columns: str) -> None:
    with op.get_context().autocommit_block():
        invalid = (
            op.get_bind()
            .exec_driver_sql(
                "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                f"WHERE c.relname = '{_BUILDING}' AND NOT i.indisvalid"
            )
            .first()
        )
        if invalid is not None:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_BUILDING}")
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {_BUILDING} ON items ({columns}) "
            "WHERE tool_call_id IS NOT NULL"
        )
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_NAME}")
    op.execute(f"ALTER INDEX {_BUILDING} RENAME TO {_NAME}")


def upgrade() -> None:
    _rebuild("tenant_id, session_id, tool_call_id")


def downgrade() -> None:
    _rebuild("session_id, tool_call_id")
