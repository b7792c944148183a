"""Filesystem failures that retrying cannot fix reach the model at once, as ToolErrors."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.files import MAX_LIST_DEPTH, list_dir, read_file, write_file
from durable_agents.activities.tools.fs_errors import WorkspaceIOError, classified
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, session_root, start

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


async def test_deterministic_failure_is_an_error_result_after_one_attempt(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    # (A lone surrogate cannot come this way: the model reply holding it is refused by
    # PostgreSQL's JSON type before any tool runs; see the unit test above.)
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": LONG_NAME}},
                    {"name": "write_file", "arguments": {"path": "deep/d", "content": "x"}},
                    {"name": "list_dir", "arguments": {"path": "deep", "recursive": True}},
                ]
            }
        ]
    )
    sid = uuid.uuid4()
    deep = session_root(workspace, tenant, sid) / "deep"
    deep.mkdir()
    with deep_tree(deep, 1_900):
        async with agent_worker(provider, workspace) as queue:
            session_id, handle = await start(
                client, resources, queue, tenant=tenant, session_id=sid,
                loosened_approvals={"write_file": "never"}, loosened_by="test",
            )  # fmt: skip
            result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert attempts and max(attempts) == 1, "a deterministic failure was retried"
    results = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    by_call = {r.tool_call_id: r for r in results}
    assert by_call["call_0_0"].data["error_type"] == "PathTooLong"
    assert by_call["call_0_1"].data["error_type"] == "NotAFile"
    assert by_call["call_0_2"].artifact_id is not None  # listed, cut at the depth cap
