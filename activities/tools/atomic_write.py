"""Replace a file atomically inside a held directory fd, never through a symlink."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

from durable_agents.activities.tools.workspace import RESERVED_DIR

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
DEFAULT_MODE = 0o644


def _existing_mode(dir_fd: int, name: str) -> int:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return DEFAULT_MODE
    # A symlink's own mode means nothing; the rename replaces the link, not its target.
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else DEFAULT_MODE


def write_at(dir_fd: int, name: str, data: bytes, *, replace: bool = True) -> None:
    """Replace ``name`` in ``dir_fd`` with ``data``: readers see the old or the new file.

    The temp file and the rename both happen relative to ``dir_fd``, so a directory swapped
    for a symlink after the caller opened ``dir_fd`` cannot redirect either. The temp name
    does not embed ``name``: a name near the filesystem's limit must not overflow it.

    Not ``replace``: ``name`` must not exist, and whatever appeared there since the caller
    looked is kept (FileExistsError): the complete file is linked in, which never replaces.
    """
    mode = _existing_mode(dir_fd, name) if replace else DEFAULT_MODE
    tmp = f".{RESERVED_DIR}-{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, _CREATE, 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if not replace:
        # The file is in place under ``name``; a temp name left behind is only litter.
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
    # Makes the rename durable; unsupported on some filesystems, hence best effort.
    with contextlib.suppress(OSError):
        os.fsync(dir_fd)
