"""A workspace directory as one deterministic gzip tar, proven to restore, and back.

Packing never follows symlinks (they are stored as links) and skips sockets, FIFOs and
devices. The same tree gives the same bytes (sorted entries, no owner names, gzip mtime 0),
so the archive's sha256 doubles as a check that nothing changed between pack and removal.
Unpacking uses tarfile's "data" filter (no absolute paths, no links leaving the tree, no
devices) into a temporary sibling that is renamed into place, so a crash never leaves a
half-restored root.

What a pack cannot hold is left out and listed, never dropped in silence: entries past the
workspace path limits, and links the "data" filter refuses to restore (absolute, or leading
outside). The list travels in the pack (a PAX global header) and in ``Pack.left_out``; a
directory whose pack left something out is kept on disk (see workspace_lifecycle).
``pack_proven`` restores every pack into a scratch directory and compares it, entry by
entry, with the tree it came from before anyone may remove that tree.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import logging
import os
import secrets
import stat
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from durable_agents.storage.errors import StorageError
from durable_agents.storage.workspace_tree import (
    FILE_FLAGS,
    TreeEntry,
    file_fingerprint,
    fingerprints,
    remove_tree,
    walk,
)

logger = logging.getLogger(__name__)

PACK_CONTENT_TYPE = "application/gzip"
_CHUNK = 1024 * 1024
_MANIFEST_KEY = "DURABLE_AGENTS.left_out"
# The manifest is for people: a bounded list plus the true count.
MAX_LISTED = 200
_MAX_SHOWN_PATH = 300

_REFUSED_WHY = {
    tarfile.AbsoluteLinkError: "a symbolic link to an absolute path",
    tarfile.LinkOutsideDestinationError: "a link that leads outside the workspace",
}


class WorkspaceNotPackable(StorageError):
    """The workspace cannot be packed so that it restores; it stays on disk untouched."""

    error_type = "WorkspaceNotPackable"


@dataclass(frozen=True)
class LeftOut:
    path: str  # relative to the workspace root, cut to a readable length
    why: str


@dataclass(frozen=True)
class Pack:
    left_out: tuple[LeftOut, ...]  # the first MAX_LISTED
    left_out_count: int
    listing: dict[str, str] = field(repr=False)  # rel -> fingerprint of what was packed

    @property
    def complete(self) -> bool:
        return self.left_out_count == 0


def _shown(rel: str) -> str:
    return rel if len(rel) <= _MAX_SHOWN_PATH else rel[:_MAX_SHOWN_PATH] + "..."


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class _Hashing:
    """A file read by tarfile, hashed on the way: the digest is of the bytes packed."""

    def __init__(self, f: io.BufferedReader) -> None:
        self._f, self.digest = f, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self.digest.update(data)
        return data


def _add(tar: tarfile.TarFile, entry: TreeEntry, listing: dict[str, str]) -> str:
    if not stat.S_ISREG(entry.mode):
        info = _normalise(tar.gettarinfo(str(entry.path), arcname=entry.rel))
        tar.addfile(info)
        return "dir" if info.isdir() else "link:" + info.linkname
    fd = os.open(entry.path, FILE_FLAGS)
    with os.fdopen(fd, "rb") as f:
        info = _normalise(tar.gettarinfo(arcname=entry.rel, fileobj=f))
        if info.islnk():  # a second name of a file already packed
            tar.addfile(info)
            return listing[info.linkname]
        if not info.isreg():
            raise WorkspaceNotPackable("a file in the workspace changed while it was packed")
        reader = _Hashing(f)
        tar.addfile(info, reader)
        return file_fingerprint(reader.digest.hexdigest(), info.mode)


def pack_dir(root: Path, out: Path, *, exclude: Mapping[str, str] | None = None) -> Pack:
    """Write the tree below ``root`` to ``out`` as a deterministic .tar.gz.

    Entries past the path limits, and those named in ``exclude`` (path -> why), are left
    out and listed in the pack's manifest."""
    members: list[TreeEntry] = []
    left: list[LeftOut] = []
    for entry in walk(root):
        why = entry.beyond or (exclude or {}).get(entry.rel)
        if why is None:
            members.append(entry)
        else:
            left.append(LeftOut(_shown(entry.rel), why))
    headers: dict[str, str] = {}
    if left:  # only then: a complete tree packs to the same bytes as it always did
        listed = [[x.path, x.why] for x in left[:MAX_LISTED]]
        headers[_MANIFEST_KEY] = json.dumps({"count": len(left), "listed": listed})
    listing: dict[str, str] = {}
    with (
        out.open("wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT, pax_headers=headers) as tar,
    ):
        for entry in members:
            listing[entry.rel] = _add(tar, entry, listing)
    return Pack(tuple(left[:MAX_LISTED]), len(left), listing)


def left_out_of(data: bytes) -> tuple[int, list[LeftOut]]:
    """The count and the listed entries a pack left out, from its manifest."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        raw = tar.pax_headers.get(_MANIFEST_KEY)
    if raw is None:
        return 0, []
    manifest = json.loads(raw)
    return int(manifest["count"]), [LeftOut(p, w) for p, w in manifest["listed"]]


def _extract(data: bytes, dest: Path) -> dict[str, str]:
    """Extract with the "data" filter, skipping (and returning, path -> why) the members
    it refuses instead of stopping at the first."""
    refused: dict[str, str] = {}

    def checked(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError as err:
            refused[member.name] = _REFUSED_WHY.get(type(err), "refused by the restore filter")
            return None

    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter=checked)
    return refused


def _scratch_dir(scratch: Path, label: str) -> Path:
    path = scratch / f".{label}-{secrets.token_hex(8)}"
    path.mkdir(mode=0o700)
    return path


def restore_check(data: bytes, pack: Pack, scratch: Path) -> dict[str, str]:
    """Restore ``data`` into a scratch directory as unpack_into would and compare it with
    ``pack.listing``. Returns the members the restore refused (path -> why); raises
    WorkspaceNotPackable if the restored tree differs in any other way."""
    staging = _scratch_dir(scratch, "verify")
    try:
        refused = _extract(data, staging)
        if refused:
            return refused
        restored = fingerprints(staging)
    except OSError as err:
        raise WorkspaceNotPackable(
            f"the workspace pack does not restore ({type(err).__name__}, errno {err.errno}); "
            "the workspace was kept"
        ) from None
    finally:
        remove_tree(staging)
    differ = [rel for rel in restored.keys() | pack.listing.keys()
              if restored.get(rel) != pack.listing.get(rel)]  # fmt: skip
    if differ:
        raise WorkspaceNotPackable(
            f"the workspace pack restores to a different tree ({len(differ)} of "
            f"{len(pack.listing)} entries differ); the workspace was kept"
        )
    return {}


def pack_proven(root: Path, out: Path, scratch: Path) -> Pack:
    """pack_dir, then restore_check; links the restore refuses are left out (and listed)
    and the tree packed once more, which must then restore exactly."""
    refused: dict[str, str] = {}
    for _ in range(2):
        pack = pack_dir(root, out, exclude=refused)
        newly = restore_check(out.read_bytes(), pack, scratch)
        if not newly:
            return pack
        refused.update(newly)
    raise WorkspaceNotPackable(
        "the workspace pack still holds entries the restore refuses; the workspace was kept"
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class PackedState:
    sha256: str
    complete: bool  # nothing was left out: the pack alone can stand for the tree


def packed_state(root: Path, scratch: Path) -> PackedState:
    """What ``root`` would pack to now (packed to a temp file in ``scratch``)."""
    tmp = scratch / f".pack-{secrets.token_hex(8)}.tar.gz"
    try:
        pack = pack_dir(root, tmp)
        return PackedState(sha256_of(tmp), pack.complete)
    finally:
        tmp.unlink(missing_ok=True)


def unpack_into(data: bytes, root: Path) -> bool:
    """Restore a packed tree at ``root``; returns False (and leaves it) if ``root`` exists.

    Members the "data" filter refuses (only in packs made before such links were left
    out) are skipped and counted in a warning: the rest of the tree is still worth having.
    """
    if root.exists():
        return False
    root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = _scratch_dir(root.parent, f"restore-{root.name}")
    try:
        refused = _extract(data, staging)
        try:
            staging.rename(root)
        except OSError:
            if root.exists():
                return False  # restored by a concurrent caller meanwhile
            raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            remove_tree(staging)
    left, _ = left_out_of(data)
    if refused or left:
        logger.warning(
            "workspace %s restored without %d entries its pack could not hold",
            root.name,
            len(refused) + left,
        )
    return True
