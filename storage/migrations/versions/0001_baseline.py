"""AgentState at 0.1.0, in one migration: every table, key, index, check, function and
trigger the schema has (0001_baseline.sql, as pg_dump wrote it from the migrations before
it). Later changes build on it, each additive with an online path (docs/DEPLOY.md).

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_SQL = Path(__file__).with_suffix(".sql")


def statements(sql: str) -> list[str]:
    """The file's statements, one each: a statement ends with a line ending in ';' outside a
    dollar-quoted function body (whose own lines end in ';' too)."""
    found: list[str] = []
    current: list[str] = []
    quoted = False
    for line in sql.splitlines():
        if line.startswith("--") or (not current and not line.strip()):
            continue
        current.append(line)
        quoted ^= line.count("$$") % 2 == 1
        if not quoted and line.rstrip().endswith(";"):
            found.append("\n".join(current))
            current = []
    if current:
        raise ValueError(f"{_SQL.name} ends inside a statement")
    return found


def upgrade() -> None:
    for statement in statements(_SQL.read_text()):
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the baseline is not downgraded: drop the database instead")
