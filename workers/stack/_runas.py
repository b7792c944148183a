"""How postgres tools run when we are root: postgres refuses to run as root.

In order of preference:
1. `runuser -u nobody` with the data dir chowned to nobody, when nobody can reach both the
   data dir and the tools (bin/, lib/, share/ and the wheel's libs). A real privilege drop.
2. The same with the tools copied into a root-owned, world-searchable cache, when nobody can
   reach the data dir but not the tools: a clone (and its .venv) in a 0700 directory such as
   /root or a `mktemp -d`.
3. A user namespace where root appears as nobody: pytest's 0700 tmp dirs (and /root) keep
   nobody out of the data dir itself. There the process keeps root's access on disk, so the
   files stay root-owned and the tools run in place; the drop is only nominal, hence last.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from durable_agents.workers.stack._pginstall import PgInstall, cached_copy
from durable_agents.workers.stack.errors import StackError

logger = logging.getLogger(__name__)

RUN_AS = "nobody"
# Written to and read by initdb; a stand-in for the rest of share/ and lib/.
_PROBE_SHARE = "postgres.bki"
_PROBE_LIB = "plpgsql.so"


@dataclass(frozen=True)
class Launch:
    """How to run the postgres tools: an argv prefix and the tree to run them from."""

    prefix: list[str]
    install: PgInstall


def _works(argv: Sequence[str]) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, check=False, cwd="/")
    except OSError:
        return False
    return done.returncode == 0


def _reaches(prefix: Sequence[str], data_dir: Path, install: PgInstall) -> bool:
    """Whether the tools run under prefix can write data_dir and load everything they need."""
    # One process: `-V` makes each binary load its shared libraries (libpq from the libs).
    script = 'test -w "$1" && test -r "$2" && test -r "$3" && "$4" -V && "$5" -V && "$6" -V'
    args = [data_dir, install.share / _PROBE_SHARE, install.lib / _PROBE_LIB]
    args += [install.tool("initdb"), install.tool("pg_ctl"), install.tool("postgres")]
    return _works([*prefix, "sh", "-c", script, "sh", *map(str, args)])


def _chown(paths: Sequence[Path], uid: int, gid: int) -> None:
    for path in paths:
        if path.exists():
            os.chown(path, uid, gid)


def pg_launch(
    data_dir: Path, install: PgInstall, cache_root: Path, writable: Sequence[Path] = ()
) -> Launch:
    """How to run initdb/pg_ctl on data_dir; also fixes ownership of data_dir and writable."""
    if os.geteuid() != 0:
        return Launch([], install)
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
        return Launch(userns, install)
    _chown(paths, nobody.pw_uid, nobody.pw_gid)
    if _reaches(runuser, data_dir, install):
        return Launch(runuser, install)
    if _works([*runuser, "test", "-w", str(data_dir)]):
        try:
            cached = cached_copy(install, cache_root)
        except (OSError, StackError) as exc:
            logger.warning("postgres: cannot copy the tools to %s: %s", cache_root, exc)
        else:
            if _reaches(runuser, data_dir, cached):
                return Launch(runuser, cached)
    if not initialized:
        _chown(paths, 0, 0)
        if _reaches(userns, data_dir, install):
            return Launch(userns, install)
    raise StackError(
        f"postgres: running as root, so postgres runs as {RUN_AS!r}, which cannot reach "
        f"{data_dir} or the PostgreSQL tools in {install.root}, and user namespaces are "
        "unavailable; use a state dir whose parents are world-searchable, or run as a "
        "regular user"
    )
