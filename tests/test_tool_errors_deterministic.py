"""Filesystem failures that retrying cannot fix reach the model at once, as ToolErrors."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from activities.tools.base import ToolContext, ToolError
from activities.tools.files import MAX_LIST_DEPTH, list_dir, read_file, write_file
from activities.tools.fs_errors import WorkspaceIOError, classified

LONG_NAME = "a" * 300
LONE_SURROGATE = "a\udc80b"


def _ctx(ws: Path) -> ToolContext:
    return ToolContext(idempotency_key="k", workspace=ws, tenant_id="t", session_id="s")


@contextmanager
def deep_tree(ws: Path, depth: int) -> Iterator[None]:
    """ws/d/d/.../d, `depth` levels, made and removed through dir fds: recursive removal
    (shutil.rmtree, pytest's tmp cleanup) would hit the recursion limit on it."""
    fds = [os.open(ws, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fds[-1])
            fds.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        yield
    finally:
        os.close(fds.pop())
        while fds:
            os.rmdir("d", dir_fd=fds[-1])
            os.close(fds.pop())


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        (read_file, {"path": LONG_NAME}, "PathTooLong"),
        (write_file, {"path": LONG_NAME, "content": "x"}, "PathTooLong"),
        (list_dir, {"path": LONG_NAME}, "PathTooLong"),
        (read_file, {"path": LONE_SURROGATE}, "InvalidPath"),
        (write_file, {"path": LONE_SURROGATE, "content": "x"}, "InvalidPath"),
        (list_dir, {"path": LONE_SURROGATE}, "InvalidPath"),
        (read_file, {"path": "plain/x"}, "NotADirectory"),
        (write_file, {"path": "sub", "content": "x"}, "NotAFile"),
    ],
)
async def test_deterministic_failures_are_tool_errors(
    tmp_path: Path, tool: Any, args: dict[str, Any], expected: str
) -> None:
    (tmp_path / "plain").write_text("a file")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ToolError) as err:
        await tool(_ctx(tmp_path), args)
    assert err.value.error_type == expected
    assert len(err.value.message) < 400  # the long name is shown bounded


async def test_deep_tree_is_listed_to_the_depth_cap_without_recursion(tmp_path: Path) -> None:
    with deep_tree(tmp_path, 1_900):
        out = await list_dir(_ctx(tmp_path), {"path": ".", "recursive": True})
    listing = json.loads(out.content)
    assert listing["truncated"] is True
    assert listing["max_depth"] == MAX_LIST_DEPTH
    assert len(listing["entries"]) == MAX_LIST_DEPTH
    assert out.summary is not None and "depth" in out.summary


@pytest.mark.parametrize(
    ("code", "deterministic"),
    [
        (errno.ENAMETOOLONG, True),
        (errno.ELOOP, True),
        (errno.ENOTDIR, True),
        (errno.EISDIR, True),
        (errno.EEXIST, True),
        (errno.EACCES, True),
        (errno.EPERM, True),
        (errno.EROFS, True),
        (errno.EINVAL, True),
        (errno.EIO, False),
        (errno.ENOSPC, False),
        (errno.EMFILE, False),
        (errno.ENFILE, False),
        (errno.EAGAIN, False),
        (errno.EINTR, False),
    ],
)
def test_errnos_are_classified(code: int, deterministic: bool) -> None:
    secret_path = "model/chosen/path"
    with pytest.raises((ToolError, WorkspaceIOError)) as err, classified("read", "'x'"):
        raise OSError(code, os.strerror(code), secret_path)
    assert isinstance(err.value, ToolError) is deterministic
    # Neither form carries the raw path: a WorkspaceIOError may reach workflow history.
    assert secret_path not in str(err.value)
    assert err.value.__suppress_context__
