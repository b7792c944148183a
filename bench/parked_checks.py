"""What bench/parked_approvals.py checks once every session has finished: one result and
one approval decision per session in AgentState, one marker file per session on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from parked_worker import marker_content, marker_path  # bench/ is on sys.path as a script
from sqlalchemy import text

from durable_agents.storage.workspaces import TENANT_DIR
from durable_agents.workers.resources import Resources


class Report(Protocol):
    def check(self, name: str, ok: bool, detail: str) -> None: ...


async def verify_items(report: Report, res: Resources, tenant: str, n: int) -> None:
    async with res.sessions() as db:
        rows = await db.execute(
            text(
                # An approval decision carries `approved`; the approver's request before it not.
                "SELECT kind, count(*), count(DISTINCT session_id) FROM items"
                " WHERE tenant_id = :t AND (kind = 'tool_result'"
                " OR (kind = 'approval' AND data ? 'approved')) GROUP BY kind"
            ),
            {"t": tenant},
        )
        kinds = {str(k): (int(c), int(d)) for k, c, d in rows.all()}
        fresh = (
            await db.execute(
                text(
                    "SELECT count(*) FROM items WHERE tenant_id = :t AND kind = 'tool_result'"
                    " AND text LIKE '%\"already_applied\": false%'"
                ),
                {"t": tenant},
            )
        ).scalar_one()
    for kind in ("tool_result", "approval"):
        total, distinct = kinds.get(kind, (0, 0))
        report.check(
            f"one {kind} item per session",
            total == n and distinct == n,
            f"{total} items over {distinct} sessions",
        )
    report.check("write_file applied fresh (not a replay)", fresh == n, f"{fresh}/{n}")


def verify_files(report: Report, workspace: Path, tenant: str, n: int) -> None:
    # The worker runs with AGENT_WORKSPACE_SCOPE=tenant: every session writes the one root.
    workspace = workspace / tenant / TENANT_DIR
    out = workspace / "out"
    files = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    expected = {Path(marker_path(i)).name for i in range(n)}
    right = sum(
        1
        for i in range(n)
        if (workspace / marker_path(i)).is_file()
        and (workspace / marker_path(i)).read_text() == marker_content(i)
    )
    report.check(
        "one marker file per session",
        len(files) == n and set(files) == expected and right == n,
        f"{len(files)} files in out/, {right}/{n} with the expected content",
    )
