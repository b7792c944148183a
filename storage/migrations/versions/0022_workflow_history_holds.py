"""agent_artifact_refs.owner_type 'workflow_history': holds of the claim check
(storage/claim_holds.py) on objects another SDK's workflow history names, and the partial
index the collector's caller reads them by (holds not settled, or settled to a time that
has come).

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_OLD = "owner_type IN ('checkpoint', 'trajectory', 'business_output')"
_NEW = "owner_type IN ('checkpoint', 'trajectory', 'business_output', 'workflow_history')"


def upgrade() -> None:
    op.drop_constraint("ck_refs_owner_type", "agent_artifact_refs", type_="check")
    op.create_check_constraint("ck_refs_owner_type", "agent_artifact_refs", _NEW)
    op.create_index(
        "ix_artifact_refs_history_holds",
        "agent_artifact_refs",
        ["tenant_id", "owner_id", "expires_at"],
        postgresql_where=sa.text("owner_type = 'workflow_history'"),
    )


def downgrade() -> None:
    op.drop_index("ix_artifact_refs_history_holds", table_name="agent_artifact_refs")
    op.execute("DELETE FROM agent_artifact_refs WHERE owner_type = 'workflow_history'")
    op.drop_constraint("ck_refs_owner_type", "agent_artifact_refs", type_="check")
    op.create_check_constraint("ck_refs_owner_type", "agent_artifact_refs", _OLD)
