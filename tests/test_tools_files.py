"""Workspace confinement, atomic writes, reads and listings of the file tools
(write_file's reconcile: tests/test_write_file_reconcile.py)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.builtin import builtin_tools, default_registry
from durable_agents.activities.tools.files import (
    MAX_LIST_ENTRIES,
    list_dir,
    make_read_file_tool,
    read_file,
    write_file,
)
from durable_agents.activities.tools.fs_errors import WorkspaceIOError
from durable_agents.activities.tools.workspace import parse_relative
from durable_agents.storage.workspace_tree import remove_tree
from durable_agents.storage.workspaces import MAX_PATH_BYTES, MAX_PATH_DEPTH


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def ctx(ws: Path, key: str = "call-1") -> ToolContext:
    return ToolContext(idempotency_key=key, workspace=ws, tenant_id="t1", session_id="s1")


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def as_json(content: bytes) -> dict[str, Any]:
    value = json.loads(content)
    assert isinstance(value, dict)
    return value


# --- confinement ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    ["../x", "/etc/passwd", "a/../../x", "", "   ", "a\x00b", "C:\\Windows", "\\\\srv\\share"],
)
def test_parse_rejects_escapes(bad: str) -> None:
    with pytest.raises(ToolError) as err:
        parse_relative(bad)
    assert err.value.error_type == "PathOutsideWorkspace"


def test_parse_resolves_inner_dotdot_lexically() -> None:
    assert parse_relative("a/../b/./c.txt").parts == ("b", "c.txt")
    assert parse_relative(".").parts == ()


async def test_symlinks_are_never_followed(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (ws / "real.txt").write_text("x")
    (ws / "link").symlink_to(outside)
    (ws / "dirlink").symlink_to(tmp_path)
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    for rel in ("link", "dirlink/secret.txt", "alias.txt"):
        with pytest.raises(ToolError) as err:
            await read_file(ctx(ws), {"path": rel})
        assert err.value.error_type == "SymlinkRefused"
        assert rel.split("/")[0] in err.value.message


@pytest.mark.parametrize(
    ("tool", "extra"),
    [(write_file, {"content": "x"}), (read_file, {}), (list_dir, {"recursive": True})],
)
async def test_paths_past_the_workspace_depth_are_a_tool_error(
    ws: Path, tool: Any, extra: dict[str, Any]
) -> None:
    # A model once wrote a path 1,100 directories deep; the archive then recursed to death.
    try:
        with pytest.raises(ToolError) as err:
            await tool(ctx(ws), {"path": "/".join(["a"] * 1_100), **extra})
    finally:
        # Were it written, pytest's own (recursive) cleanup of tmp dirs would choke on it.
        remove_tree(ws / "a")
    assert err.value.error_type == "PathTooDeep"
    assert f"at most {MAX_PATH_DEPTH} deep" in err.value.message
    assert len(err.value.message) < 400
    assert names(ws) == []  # nothing was created on the way


async def test_the_deepest_and_longest_paths_allowed_are_written(ws: Path) -> None:
    deepest = "/".join(["d"] * MAX_PATH_DEPTH)
    await write_file(ctx(ws), {"path": deepest, "content": "deep"})
    assert (ws / deepest).read_text() == "deep"
    longest = "/".join(["n" * 200] * 11)[: MAX_PATH_BYTES - 1] + "z"
    assert len(longest) == MAX_PATH_BYTES
    await write_file(ctx(ws), {"path": longest, "content": "long"})
    with pytest.raises(ToolError) as err:
        await write_file(ctx(ws), {"path": longest + "z", "content": "x"})
    assert err.value.error_type == "PathTooLong"
    assert f"{MAX_PATH_BYTES} bytes" in err.value.message


@pytest.mark.parametrize("reserved", [".agent", ".agent/effects/abc.json", "x/../.agent/effects"])
def test_parse_rejects_reserved(reserved: str) -> None:
    with pytest.raises(ToolError) as err:
        parse_relative(reserved)
    assert err.value.error_type == "ReservedPath"


async def test_symlink_into_reserved_dir_is_refused(ws: Path) -> None:
    (ws / ".agent" / "effects").mkdir(parents=True)
    (ws / "sneaky").symlink_to(ws / ".agent")
    with pytest.raises(ToolError) as err:
        await list_dir(ctx(ws), {"path": "sneaky/effects"})
    assert err.value.error_type == "SymlinkRefused"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("../x", "PathOutsideWorkspace"),
        ("/etc/passwd", "PathOutsideWorkspace"),
        ("link", "SymlinkRefused"),
        (".agent/effects/whatever.json", "ReservedPath"),
    ],
)
async def test_tools_refuse_bad_paths(ws: Path, tmp_path: Path, path: str, expected: str) -> None:
    (tmp_path / "outside.txt").write_text("do not touch")
    (ws / "link").symlink_to(tmp_path / "outside.txt")
    (ws / ".agent" / "effects").mkdir(parents=True)
    (ws / ".agent" / "effects" / "whatever.json").write_text("{}")
    calls: list[tuple[Any, dict[str, Any]]] = [
        (read_file, {"path": path}),
        (write_file, {"path": path, "content": "pwned"}),
        (list_dir, {"path": path}),
    ]
    for tool, args in calls:
        with pytest.raises(ToolError) as err:
            await tool(ctx(ws, key=f"k-{path}"), args)
        assert err.value.error_type == expected
    assert (tmp_path / "outside.txt").read_text() == "do not touch"
    assert (ws / ".agent" / "effects" / "whatever.json").read_text() == "{}"


# --- argument validation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (read_file, {}),
        (read_file, {"path": 3}),
        (read_file, {"path": "a", "max_bytes": "10"}),
        (read_file, {"path": "a", "max_bytes": True}),
        (read_file, {"path": "a", "max_bytes": 0}),
        (write_file, {"path": "a"}),
        (write_file, {"content": "x"}),
        (write_file, {"path": "a", "content": ["x"]}),
        (write_file, {"_raw": '{"path": "a", "content": '}),
        (list_dir, {"recursive": "yes"}),
        (list_dir, {"path": 1}),
        (list_dir, {"_raw": "nonsense"}),
    ],
)
async def test_invalid_arguments(ws: Path, tool: Any, args: dict[str, Any]) -> None:
    with pytest.raises(ToolError) as err:
        await tool(ctx(ws), args)
    assert err.value.error_type == "InvalidArguments"
    assert not (ws / "a").exists()


# --- write_file ----------------------------------------------------------------------


async def test_write_returns_what_it_wrote(ws: Path) -> None:
    first = await write_file(ctx(ws, "k1"), {"path": "out/notes.txt", "content": "hello"})
    assert (ws / "out" / "notes.txt").read_text() == "hello"
    assert as_json(first.content) == {
        "path": "out/notes.txt",
        "bytes": 5,
        "sha256": hashlib.sha256(b"hello").hexdigest(),
        "already_applied": False,
    }
    # Nothing of its own in the workspace: the effects ledger is in AgentState now.
    assert names(ws) == ["out"]


async def test_write_is_atomic_and_leaves_no_temp_files(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("old")
    os.chmod(ws / "d" / "f.txt", 0o640)
    await write_file(ctx(ws, "a"), {"path": "d/f.txt", "content": "new ✓"})
    assert (ws / "d" / "f.txt").read_bytes() == "new ✓".encode()
    assert names(ws / "d") == ["f.txt"]
    assert names(ws) == ["d"]
    assert (ws / "d" / "f.txt").stat().st_mode & 0o777 == 0o640


async def test_write_onto_directory_is_refused(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").mkdir()  # a directory where the file should go
    with pytest.raises(ToolError) as err:
        await write_file(ctx(ws, "a"), {"path": "d/f.txt", "content": "x"})
    assert err.value.error_type == "NotAFile"
    assert names(ws / "d") == ["f.txt"]
    assert not (ws / ".agent").exists()


async def test_failed_rename_leaves_old_file_and_no_temp(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "f.txt").write_text("old")

    def broken_replace(src: str, dst: str, **fds: int) -> None:
        raise OSError(errno.EIO, "disk on fire", dst)

    # The disk is outside the system: fail its rename as a dying disk would.
    monkeypatch.setattr("durable_agents.activities.tools.atomic_write.os.replace", broken_replace)
    with pytest.raises(WorkspaceIOError) as err:
        await write_file(ctx(ws, "a"), {"path": "f.txt", "content": "new"})
    assert "f.txt" not in str(err.value)  # it may reach workflow history: no model paths
    monkeypatch.undo()
    assert names(ws) == ["f.txt"]  # no temp file, no ledger entry
    assert (ws / "f.txt").read_text() == "old"
    # The failed attempt recorded nothing, so the retry really writes.
    retry = await write_file(ctx(ws, "a"), {"path": "f.txt", "content": "new"})
    assert as_json(retry.content)["already_applied"] is False
    assert (ws / "f.txt").read_text() == "new"


async def test_write_under_a_file_parent(ws: Path) -> None:
    (ws / "plain").write_text("x")
    with pytest.raises(ToolError) as err:
        await write_file(ctx(ws, "a"), {"path": "plain/child.txt", "content": "x"})
    assert err.value.error_type == "NotADirectory"


# --- read_file -----------------------------------------------------------------------


async def test_read_large_file_returns_all_bytes(ws: Path) -> None:
    data = os.urandom(3 * 1024 * 1024)
    (ws / "big.bin").write_bytes(data)
    out = await read_file(ctx(ws), {"path": "big.bin"})
    assert out.content == data
    assert out.content_type == "application/octet-stream"


async def test_read_text_and_types(ws: Path) -> None:
    (ws / "notes").write_text("plain text, no extension ✓")
    (ws / "data.json").write_text('{"a": 1}')
    (ws / "page.html").write_text("<p>hi</p>")
    notes = await read_file(ctx(ws), {"path": "notes"})
    assert notes.content == "plain text, no extension ✓".encode()
    assert notes.content_type == "text/plain; charset=utf-8"
    assert (await read_file(ctx(ws), {"path": "data.json"})).content_type == (
        "application/json; charset=utf-8"
    )
    assert (await read_file(ctx(ws), {"path": "page.html"})).content_type == (
        "text/html; charset=utf-8"
    )


async def test_read_max_bytes_and_cap(ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"0123456789")
    head = await read_file(ctx(ws), {"path": "f.txt", "max_bytes": 4})
    assert head.content == b"0123"
    assert head.content_type == "text/plain; charset=utf-8"
    small_cap = make_read_file_tool(cap_bytes=5).fn
    with pytest.raises(ToolError) as err:
        await small_cap(ctx(ws), {"path": "f.txt"})
    assert err.value.error_type == "FileTooLarge"
    assert (await small_cap(ctx(ws), {"path": "f.txt", "max_bytes": 100})).content == b"01234"


async def test_read_missing_and_directory(ws: Path) -> None:
    (ws / "sub").mkdir()
    for path, expected in (("nope.txt", "FileNotFound"), ("sub", "NotAFile"), (".", "NotAFile")):
        with pytest.raises(ToolError) as err:
            await read_file(ctx(ws), {"path": path})
        assert err.value.error_type == expected


async def test_writing_what_a_file_already_holds_writes_nothing_and_says_so(ws: Path) -> None:
    first = await write_file(ctx(ws), {"path": "out/r.md", "content": "same"})
    before = (ws / "out" / "r.md").stat()
    again = await write_file(ctx(ws, "call-2"), {"path": "out/r.md", "content": "same"})
    told = json.loads(again.content)
    assert (first.changed, again.changed) == (True, False)
    assert told["unchanged"] is True and told["already_applied"] is False
    assert told["note"] == "the file already held exactly this, so nothing was written"
    after = (ws / "out" / "r.md").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # A longer or shorter content is a change.
    assert (await write_file(ctx(ws, "call-3"), {"path": "out/r.md", "content": "same!"})).changed
    assert (await write_file(ctx(ws, "call-4"), {"path": "out/r.md", "content": "sam"})).changed
    assert (ws / "out" / "r.md").read_text() == "sam"


async def test_read_fifo_is_refused_without_hanging(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(ToolError) as err:
        await read_file(ctx(ws), {"path": "pipe"})
    assert err.value.error_type == "NotAFile"


# --- list_dir ------------------------------------------------------------------------


async def test_list_dir(ws: Path, tmp_path: Path) -> None:
    (ws / "b.txt").write_text("bb")
    (ws / "a").mkdir()
    (ws / "a" / "x.py").write_text("x = 1\n")
    (ws / "a.txt").write_text("a")
    (ws / "outside").symlink_to(tmp_path)
    await write_file(ctx(ws, "k"), {"path": "w.txt", "content": "w"})  # creates .agent/

    flat = as_json((await list_dir(ctx(ws), {})).content)
    assert flat == {
        "path": ".",
        "truncated": False,
        "entries": [
            {"path": "a", "type": "dir", "size": None},
            {"path": "a.txt", "type": "file", "size": 1},
            {"path": "b.txt", "type": "file", "size": 2},
            {"path": "w.txt", "type": "file", "size": 1},
        ],
    }
    deep = as_json((await list_dir(ctx(ws), {"path": ".", "recursive": True})).content)
    assert [e["path"] for e in deep["entries"]] == ["a", "a/x.py", "a.txt", "b.txt", "w.txt"]
    sub = as_json((await list_dir(ctx(ws), {"path": "a"})).content)
    assert sub["entries"] == [{"path": "a/x.py", "type": "file", "size": 6}]


async def test_list_dir_errors_and_truncation(ws: Path) -> None:
    (ws / "f.txt").write_text("x")
    with pytest.raises(ToolError) as err:
        await list_dir(ctx(ws), {"path": "f.txt"})
    assert err.value.error_type == "NotADirectory"
    with pytest.raises(ToolError) as err:
        await list_dir(ctx(ws), {"path": "missing"})
    assert err.value.error_type == "FileNotFound"

    many = ws / "many"
    many.mkdir()
    for i in range(MAX_LIST_ENTRIES + 5):
        (many / f"f{i:05d}").touch()
    listing = as_json((await list_dir(ctx(ws), {"path": "many"})).content)
    assert listing["truncated"] is True
    assert len(listing["entries"]) == MAX_LIST_ENTRIES
    assert listing["entries"][0]["path"] == "many/f00000"


# --- registry ------------------------------------------------------------------------


def test_builtin_policy() -> None:
    tools = {t.spec.name: t for t in builtin_tools()}
    assert set(tools) == {
        "read_file",
        "write_file",
        "edit_file",
        "append_file",
        "list_dir",
        "search_files",
        "fetch_url",
        "remember",
        "recall",
        "forget",
        "read_artifact",
        "delegate",
    }
    assert tools["write_file"].default_policy == "always"
    # Asks when the file exists; on a missing file it fails without asking anybody.
    assert tools["edit_file"].default_policy == "exists:path"
    assert tools["append_file"].default_policy == "exists:path"  # a missing one: unasked
    for name in ("write_file", "edit_file", "append_file"):
        assert tools[name].effect == "effectful" and tools[name].reconcile is not None
    for name in ("read_file", "list_dir", "search_files", "fetch_url", "recall", "read_artifact"):
        assert not tools[name].needs_approval
        assert tools[name].effect == "read_only"
    for name in ("remember", "forget"):
        assert not tools[name].needs_approval and tools[name].effect == "idempotent"
    assert tools["write_file"].spec.parameters["required"] == ["path", "content"]
    registry = default_registry()
    assert registry.get("fetch_url") is not None
    assert [s.name for s in registry.specs()] == list(tools)
