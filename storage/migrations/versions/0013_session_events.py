"""Session events: PostgreSQL NOTIFY on channel agent_events when an item commits or a
session's status (or model-wait detail) changes, so a gateway streams changes as they commit
with one LISTEN connection instead of a poll per client. The payload holds ids only:
{"t": tenant, "s": session, "o": ordinal} or {"t", "s", "status"}.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


_UP = (
    """
    CREATE FUNCTION agent_notify_item() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('agent_events', json_build_object(
            't', NEW.tenant_id, 's', NEW.session_id, 'o', NEW.ordinal)::text);
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER items_notify AFTER INSERT ON items
        FOR EACH ROW EXECUTE FUNCTION agent_notify_item()
    """,
    """
    CREATE FUNCTION agent_notify_status() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('agent_events', json_build_object(
            't', NEW.tenant_id, 's', NEW.id, 'status', NEW.status)::text);
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER sessions_notify_status AFTER UPDATE ON sessions
        FOR EACH ROW
        WHEN (OLD.status IS DISTINCT FROM NEW.status
              OR OLD.wait_detail IS DISTINCT FROM NEW.wait_detail)
        EXECUTE FUNCTION agent_notify_status()
    """,
)
_DOWN = (
    "DROP TRIGGER sessions_notify_status ON sessions",
    "DROP FUNCTION agent_notify_status()",
    "DROP TRIGGER items_notify ON items",
    "DROP FUNCTION agent_notify_item()",
)


def upgrade() -> None:
    # One statement per execute: asyncpg prepares each, and a prepared statement is one.
    for statement in _UP:
        op.execute(statement)


def downgrade() -> None:
    for statement in _DOWN:
        op.execute(statement)
