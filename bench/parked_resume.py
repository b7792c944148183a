"""A parked-approvals run in two halves (bench/parked_approvals.py --keep DIR / --resume DIR):
the first starts and parks the sessions on a stack whose state stays in DIR, the second
starts that stack again from DIR, later, and queries, approves and checks the same sessions.

What the second half needs of the first is written to DIR/parked-run.json: the tenant, the
task queue and how many sessions were started. The session ids are read back from AgentState.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlalchemy import text

from durable_agents.workers.resources import Resources

RUN_FILE = "parked-run.json"


@dataclass(frozen=True)
class KeptRun:
    tenant: str
    queue: str
    sessions: int


def save_run(state: Path, run: KeptRun) -> None:
    (state / RUN_FILE).write_text(json.dumps(asdict(run)) + "\n")


def load_run(state: Path) -> KeptRun:
    """The first half's run; a clear error when DIR holds none."""
    path = state / RUN_FILE
    if not path.is_file():
        raise SystemExit(f"--resume {state}: no {RUN_FILE} there (start it with --keep)")
    try:
        raw = json.loads(path.read_text())
        return KeptRun(str(raw["tenant"]), str(raw["queue"]), int(raw["sessions"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"--resume {state}: {RUN_FILE} is not a kept run ({exc!r})") from None


def check_keep_dir(state: Path) -> None:
    """--keep starts a new stack: refuse a directory that already holds one."""
    if state.exists() and any(state.iterdir()):
        raise SystemExit(f"--keep {state}: not empty (resume it with --resume, or pick another)")


async def kept_sessions(res: Resources, tenant: str) -> dict[str, str]:
    """The tenant's sessions and their statuses, each named as start_task named it (the
    workflow id without `agent-`)."""
    async with res.sessions() as db:
        rows = await db.execute(
            text("SELECT id, status FROM sessions WHERE tenant_id = :t ORDER BY created_at, id"),
            {"t": tenant},
        )
        return {str(sid): str(status) for sid, status in rows.all()}
