"""Fewer bytes per step: items are unique on a 16-byte hash of (tenant, idempotency key)
instead of on the key's text, and agent_artifacts.uri is no longer written.

items: the unique constraint on idempotency_key (52-67 B keys, ~570 B of index per step of
three items) becomes a unique expression index on item_key_hash(tenant_id, idempotency_key),
a uuid made of the first 16 bytes of sha256 over the length-prefixed tenant and the key. The
key itself stays in the row and every lookup compares it (and the tenant) too, so a hash
match alone never returns a row. The tenant is inside the hash: a colliding key would need a
second preimage of sha256 to touch another tenant's rows; within a tenant, a crafted
collision (2^64 work) only refuses that tenant's own insert. Keys become unique per tenant
(they were unique across tenants).

ix_items_session_tool_call holds only items of a tool call (tool_call_id set): replies and
user messages are a third of the rows and no lookup by call can match them.

agent_artifacts.uri: the store location is derived from the bucket and the content-addressed
key (ArtifactStore.uri), so new rows leave it NULL; rows written before keep theirs. The
downgrade fills NULLs with a URN of the content ('urn:sha256:<hex>'), as the bucket is
configuration a migration does not know.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # convert_to is only STABLE (it looks the conversion up), but UTF8 to UTF8 never changes:
    # the function is declared IMMUTABLE so an index can be built on it.
    op.execute(
        """
        CREATE FUNCTION item_key_hash(tenant text, key text) RETURNS uuid
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT encode(substr(sha256(convert_to(
                length(tenant)::text || ':' || tenant || key, 'UTF8')), 1, 16), 'hex')::uuid
        $$
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX ux_items_key_hash ON items (item_key_hash(tenant_id, idempotency_key))"
    )
    op.drop_constraint("uq_items_idempotency_key", "items", type_="unique")
    op.drop_index("ix_items_session_tool_call", table_name="items")
    op.create_index(
        "ix_items_session_tool_call",
        "items",
        ["session_id", "tool_call_id"],
        postgresql_where=sa.text("tool_call_id IS NOT NULL"),
    )
    op.alter_column("agent_artifacts", "uri", existing_type=sa.Text(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE agent_artifacts SET uri = 'urn:sha256:' || sha256 WHERE uri IS NULL")
    op.alter_column("agent_artifacts", "uri", existing_type=sa.Text(), nullable=False)
    # Fails if two tenants have since used the same key: 0014 cannot hold both rows.
    op.create_unique_constraint("uq_items_idempotency_key", "items", ["idempotency_key"])
    op.drop_index("ux_items_key_hash", table_name="items")
    op.drop_index("ix_items_session_tool_call", table_name="items")
    op.create_index("ix_items_session_tool_call", "items", ["session_id", "tool_call_id"])
    op.execute("DROP FUNCTION item_key_hash(text, text)")
