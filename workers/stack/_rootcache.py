"""Root-owned, read-only copies of the stack's binaries, for the service users (roles.py) who
cannot reach the originals: a clone (and its .venv) in a 0700 directory such as /root or a
`mktemp -d`. Only root makes them; a copy is keyed by what it holds, made once, and
published whole (a reader sees no copy or a complete one).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from durable_agents.workers.stack.errors import StackError

# Root-only, world-searchable, and not something another user can pre-create (unlike /tmp).
DEFAULT_CACHE_ROOT = Path("/var/cache/durable-agents")


def published(key: str, fill: Callable[[Path], None], cache_root: Path, what: str) -> Path:
    """cache_root/key, made once by fill(staging dir) then made read-only: owned by root,
    dirs 0755, files 0444 (0555 when executable). StackError when a directory on the way
    is one another user could have written."""
    final = cache_root / key
    if not final.exists():
        cache_root.mkdir(mode=0o755, parents=True, exist_ok=True)
        check_safe(cache_root, what)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_root))
        try:
            fill(staging)
            _make_read_only(staging)
            # Atomic: a concurrent copier's may win.
            try:
                staging.rename(final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    check_safe(final, what)
    return final


def cached_executable(path: Path, cache_root: Path, what: str) -> Path:
    """A root-owned read-only copy of the executable at path, keyed by its digest."""

    def fill(staging: Path) -> None:
        shutil.copy2(path, staging / path.name)

    return published(f"{path.name}-{digest(path)}", fill, cache_root, what) / path.name


def digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:12]


def _make_read_only(top: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(top):
        os.chmod(dirpath, 0o755)
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            if path.is_symlink() or path.is_dir():
                continue
            executable = path.stat().st_mode & stat.S_IXUSR
            path.chmod(0o555 if executable else 0o444)


def check_safe(path: Path, what: str) -> None:
    """StackError unless path and every directory above it is root's and only root may
    write it (a sticky /tmp aside): the binaries run from here as a service's user."""
    for p in [path, *path.parents]:
        st = p.lstat()
        sticky_tmp = st.st_mode & stat.S_ISVTX
        if st.st_uid != 0 or (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_tmp):
            raise StackError(
                f"{what}: {p} is not a root-owned directory only root can write; refusing to "
                f"run the binaries cached under {path}"
            )
