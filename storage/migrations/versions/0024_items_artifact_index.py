"""ix_items_artifact: the items that point at an artifact, by (tenant_id, artifact_id), for
tool results only (artifact_id set).

Archive deletes the artifact rows only its session's items named (their list moves into
the snapshot, storage/archive.py), after checking no other session's item names them; and
deleting any agent_artifacts row makes PostgreSQL check fk_items_artifact against items.
Both were a scan of items per artifact without this index.

Online: built CONCURRENTLY (no lock that blocks writes); an INVALID leftover of an
interrupted build is dropped first.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        invalid = (
            op.get_bind()
            .exec_driver_sql(
                "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = 'ix_items_artifact' AND NOT i.indisvalid"
            )
            .first()
        )
        if invalid is not None:
            op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_items_artifact")
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_items_artifact "
            "ON items (tenant_id, artifact_id) WHERE artifact_id IS NOT NULL"
        )


def downgrade() -> None:
    op.execute("DROP INDEX ix_items_artifact")
