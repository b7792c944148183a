"""What bench/parked_approvals.py checks once every session has finished: one result and
one approval decision per session in AgentState (rows set aside counted apart), one marker
file per session on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from parked_worker import marker_content, marker_path  # bench/ is on sys.path as a script
from sqlalchemy import text

from durable_agents.storage.items import SET_ASIDE_PREFIX
from durable_agents.storage.workspaces import TENANT_DIR
from durable_agents.workers.resources import Resources


class Report(Protocol):
    def check(self, name: str, ok: bool, detail: str) -> None: ...


async def verify_items(
    report: Report, res: Resources, tenant: str, n: int, resumed: bool = False
) -> None:
    """`resumed`: a run after a stop, where a write a killed run made before committing its
    result is settled from the workspace (`already_applied`) instead of written again."""
    async with res.sessions() as db:
        rows = await db.execute(
            text(
                # An approval decision carries `approved`; the approver's request before it
                # not. Rows set aside (a decision the loop never took) apart.
                "SELECT kind, idempotency_key LIKE :aside, count(*), count(DISTINCT session_id)"
                " FROM items WHERE tenant_id = :t AND (kind = 'tool_result'"
                " OR (kind = 'approval' AND data ? 'approved')) GROUP BY 1, 2"
            ),
            {"t": tenant, "aside": f"{SET_ASIDE_PREFIX}%"},
        )
        kinds: dict[str, tuple[int, int]] = {}
        aside: dict[str, int] = {}
        for k, set_aside, c, d in rows.all():
            if set_aside:
                aside[str(k)] = int(c)
            else:
                kinds[str(k)] = (int(c), int(d))
        applied = await db.execute(
            text(
                "SELECT text LIKE '%\"already_applied\": false%', count(*) FROM items"
                " WHERE tenant_id = :t AND kind = 'tool_result'"
                " AND text LIKE '%\"already_applied\": %' AND idempotency_key NOT LIKE :aside"
                " GROUP BY 1"
            ),
            {"t": tenant, "aside": f"{SET_ASIDE_PREFIX}%"},
        )
        by_fresh = {bool(f): int(c) for f, c in applied.all()}
        fresh, settled = by_fresh.get(True, 0), by_fresh.get(False, 0)
    for kind in ("tool_result", "approval"):
        total, distinct = kinds.get(kind, (0, 0))
        report.check(
            f"one {kind} item per session",
            total == n and distinct == n,
            f"{total} items over {distinct} sessions"
            + (f" ({aside[kind]} more set aside)" if kind in aside else ""),
        )
    if resumed and settled:
        report.check(
            "write_file applied once (fresh, or settled from the workspace after a kill)",
            fresh + settled == n,
            f"{fresh} fresh + {settled} settled / {n}",
        )
    else:
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
