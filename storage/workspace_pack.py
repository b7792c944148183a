"""A workspace directory as one deterministic gzip tar, and back.

Packing never follows symlinks (they are stored as links) and skips sockets, FIFOs and
devices. The same tree gives the same bytes (sorted entries, no owner names, gzip mtime 0),
so the archive's sha256 doubles as a check that nothing changed between pack and removal.
Unpacking uses tarfile's "data" filter (no absolute paths, no links leaving the tree, no
devices) into a temporary sibling that is renamed into place, so a crash never leaves a
half-restored root.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import secrets
import shutil
import stat
import tarfile
from pathlib import Path

PACK_CONTENT_TYPE = "application/gzip"
_CHUNK = 1024 * 1024


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _entries(root: Path) -> list[Path]:
    found: list[Path] = []
    for here, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(here)
        for name in dirs + sorted(files):
            path = base / name
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def pack_dir(root: Path, out: Path) -> None:
    """Write the tree below ``root`` to ``out`` as a deterministic .tar.gz."""
    with (
        out.open("wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in _entries(root):
            rel = path.relative_to(root).as_posix()
            tar.add(path, arcname=rel, recursive=False, filter=_normalise)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def packed_sha256(root: Path, scratch: Path) -> str:
    """The sha256 ``root`` would pack to now (packed to a temp file in ``scratch``)."""
    tmp = scratch / f".pack-{secrets.token_hex(8)}.tar.gz"
    try:
        pack_dir(root, tmp)
        return sha256_of(tmp)
    finally:
        tmp.unlink(missing_ok=True)


def unpack_into(data: bytes, root: Path) -> bool:
    """Restore a packed tree at ``root``; returns False (and leaves it) if ``root`` exists."""
    if root.exists():
        return False
    root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = root.parent / f".restore-{root.name}-{secrets.token_hex(8)}"
    staging.mkdir(mode=0o700)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(staging, filter="data")
        try:
            staging.rename(root)
        except OSError:
            if root.exists():
                return False  # restored by a concurrent caller meanwhile
            raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging)
    return True
