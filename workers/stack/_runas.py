"""How postgres tools run when we are root: postgres refuses to run as root.

The usual way is `runuser -u nobody` with the data dir chowned to nobody. That needs
nobody to reach the data dir through its parents, which pytest's 0700 tmp dirs (and
/root) forbid; there the tools run in a user namespace where root appears as nobody but
keeps root's access on disk, so the files stay root-owned.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Sequence
from pathlib import Path

from workers.stack.errors import StackError

RUN_AS = "nobody"


def _works(argv: Sequence[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, check=False).returncode == 0
    except OSError:
        return False


def _chown(paths: Sequence[Path], uid: int, gid: int) -> None:
    for path in paths:
        if path.exists():
            os.chown(path, uid, gid)


def pg_launcher(data_dir: Path, writable: Sequence[Path] = ()) -> list[str]:
    """argv prefix for initdb/pg_ctl on data_dir; also fixes ownership of writable paths."""
    if os.geteuid() != 0:
        return []
    nobody = pwd.getpwnam(RUN_AS)
    runuser = ["runuser", "-u", RUN_AS, "--"]
    userns = [
        "unshare", "--user", f"--map-user={nobody.pw_uid}", f"--map-group={nobody.pw_gid}", "--",
    ]  # fmt: skip
    paths = [data_dir, *writable]
    initialized = (data_dir / "PG_VERSION").exists()
    if initialized and data_dir.stat().st_uid == 0:
        # Set up in a user namespace before; its root-owned files only work that way.
        _chown(paths, 0, 0)
        return userns
    _chown(paths, nobody.pw_uid, nobody.pw_gid)
    if _works([*runuser, "test", "-w", str(data_dir)]):
        return runuser
    if not initialized:
        _chown(paths, 0, 0)
        if _works([*userns, "test", "-w", str(data_dir)]):
            return userns
    raise StackError(
        f"postgres: running as root, so postgres runs as {RUN_AS!r}, which cannot reach "
        f"{data_dir}, and user namespaces are unavailable; use a state dir whose parents "
        "are world-searchable, or run as a regular user"
    )
