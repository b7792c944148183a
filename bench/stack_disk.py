"""What the throwaway stack's stores hold on disk (allocated blocks, as `du` counts them):
Temporal's SQLite database with its WAL, PostgreSQL's data directory apart from its WAL,
that WAL, SeaweedFS's volumes, and the agents' workspace."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _allocated(path: Path, skip: Path | None = None) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        if skip is not None:
            dirs[:] = [d for d in dirs if Path(root, d) != skip]
        for name in files:
            with contextlib.suppress(OSError):  # removed while walking (a recycled WAL file)
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def stack_disk(state: Path) -> dict[str, int]:
    """Bytes on disk by store, under the stack's state directory `state`."""
    postgres = state / "postgres"
    temporal = sum(os.lstat(p).st_blocks * 512 for p in state.glob("temporal.db*") if p.is_file())
    return {
        "temporal": temporal,
        "postgres": _allocated(postgres, skip=postgres / "pg_wal"),
        "postgres WAL": _allocated(postgres / "pg_wal"),
        "s3": _allocated(state / "s3"),
        "workspace": _allocated(state / "workspace"),
    }


def per_session(before: dict[str, int], after: dict[str, int], sessions: int) -> str:
    """The growth of each store per session, in bytes."""
    return ", ".join(
        f"{name} {(after[name] - before[name]) / max(1, sessions):,.0f} B" for name in after
    )
