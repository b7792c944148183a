"""Which filesystem errors are the model's to hear about, and which are worth a retry.

A deterministic failure (a name too long, a parent that is a file, a read-only disk) gives
the same answer on every attempt, so it becomes a ToolError at once instead of six retries
spread over half a minute. Only conditions that can clear by themselves (I/O errors, a full
disk, too many open files, interrupted calls) are raised for Temporal to retry.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from durable_agents.activities.tools.base import ToolError

# errno -> ToolError type. Anything not listed is treated as transient.
DETERMINISTIC: dict[int, str] = {
    errno.ENOENT: "FileNotFound",
    errno.ENOTDIR: "NotADirectory",
    errno.EISDIR: "NotAFile",
    errno.EEXIST: "AlreadyExists",
    errno.ENOTEMPTY: "AlreadyExists",
    errno.EACCES: "PermissionDenied",
    errno.EPERM: "PermissionDenied",
    errno.EROFS: "ReadOnlyFilesystem",
    errno.ENAMETOOLONG: "PathTooLong",
    # Only a symlink met with O_NOFOLLOW gives ELOOP here: tools never traverse symlinks.
    errno.ELOOP: "SymlinkRefused",
    errno.EINVAL: "InvalidPath",
    errno.EILSEQ: "InvalidPath",
    errno.EFBIG: "FileTooLarge",
    errno.ENXIO: "NotAFile",  # a FIFO or socket opened non-blocking
    errno.ENODEV: "NotAFile",
    errno.EXDEV: "InvalidPath",
}

TRANSIENT = frozenset(
    {errno.EIO, errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.EINTR}
)


class WorkspaceIOError(Exception):
    """A filesystem failure that may clear by itself; the activity fails and is retried.

    Its message names the operation and the errno only: an exception that propagates ends
    up in Temporal history, where a model-chosen path must not go.
    """


def _reason(exc: OSError) -> str:
    return exc.strerror or (errno.errorcode.get(exc.errno or 0) or "error")


@contextmanager
def classified(action: str, shown: str) -> Iterator[None]:
    """Turn an OSError raised inside the block into a ToolError or a WorkspaceIOError.

    ``shown`` is the already-bounded display form of the path (see workspace.shown).
    """
    try:
        yield
    except OSError as exc:
        kind = DETERMINISTIC.get(exc.errno or 0)
        if kind is not None:
            raise ToolError(kind, f"cannot {action} {shown}: {_reason(exc)}") from None
        code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        # `from None` and no filename: the original carries the path and would be chained.
        raise WorkspaceIOError(f"{action} failed with {code}; retrying may help") from None
