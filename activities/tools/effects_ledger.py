"""The write tools' effects ledger in ``.agent/effects``: what each idempotency key wrote.

Read and written through the workspace's root fd like any tool path, so a symlink planted
at ``.agent`` cannot send the ledger elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from activities.tools.atomic_write import write_at
from activities.tools.base import ToolError
from activities.tools.fd_walk import held_dir
from activities.tools.workspace import RESERVED_DIR, WorkspacePath

EFFECTS_DIR = f"{RESERVED_DIR}/effects"
_DIR = WorkspacePath((RESERVED_DIR, "effects"))
_MAX_ENTRY_BYTES = 64 * 1024


def _name(idempotency_key: str) -> str:
    # Hashed so arbitrary key characters can never form a path of their own.
    return hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest() + ".json"


def _corrupt(why: str) -> ToolError:
    return ToolError("EffectsLedgerCorrupt", f"the effects ledger entry for this call is {why}")


def load(root_fd: int, idempotency_key: str) -> dict[str, Any] | None:
    """The entry recorded for this key, or None if the key wrote nothing yet."""
    try:
        with held_dir(root_fd, _DIR) as dir_fd:
            fd = os.open(
                _name(idempotency_key), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
            )
    except FileNotFoundError:
        return None
    except ToolError as err:
        if err.error_type == "FileNotFound":
            return None
        # Rewriting could clobber edits made since the first write, so do not guess.
        raise _corrupt("unreachable") from None
    except OSError:
        raise _corrupt("unreadable") from None
    try:
        raw = os.read(fd, _MAX_ENTRY_BYTES)
    finally:
        os.close(fd)
    try:
        entry = json.loads(raw)
    except ValueError:
        raise _corrupt("unreadable") from None
    if not isinstance(entry, dict) or not {"path", "sha256", "bytes"} <= entry.keys():
        raise _corrupt("invalid")
    return entry


def record(root_fd: int, idempotency_key: str, entry: dict[str, Any]) -> None:
    """Record what this key wrote (after the file itself: a crash in between only means
    the retry rewrites identical bytes)."""
    with held_dir(root_fd, _DIR, create=True) as dir_fd:
        write_at(dir_fd, _name(idempotency_key), json.dumps(entry, sort_keys=True).encode())
