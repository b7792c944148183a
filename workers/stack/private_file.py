"""Files only their owner may read: the dev stack's passwords and the env files `dev up`
writes for other processes (workers/dev_env.py)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_private_file(path: Path, text: str, *, owner: tuple[int, int] | None = None) -> None:
    """path holds text, mode 0600 whatever the umask; a reader sees the old file or the
    whole new one, never a part or a moment of wider permissions. owner: (uid, gid) to
    give it, for a file in a directory another user owns: O_EXCL, so a link planted there
    is never followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            if owner is not None:
                os.fchown(f.fileno(), *owner)
            f.write(text)
        os.replace(staging, path)
    except BaseException:
        with contextlib.suppress(OSError):
            staging.unlink()
        raise
