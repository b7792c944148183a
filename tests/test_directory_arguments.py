"""A directory argument of list_dir and search_files: "" names the workspace root, as "."
does (a small model sends "" for "everything"); an empty file path is still refused, and an
absolute path is refused naming the call to make instead, where one means a workspace path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.files import list_dir, read_file
from durable_agents.activities.tools.search import search_files


def ctx(root: Path) -> ToolContext:
    return ToolContext(idempotency_key="k", workspace=root, tenant_id="t", session_id="s")


async def listed(root: Path, path: str) -> dict[str, Any]:
    return dict(json.loads((await list_dir(ctx(root), {"path": path})).content))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "docs/a.md").write_text("the mascot is a flamingo\n")
    (ws / "b.txt").write_text("no mascot\n")
    return ws


async def test_an_empty_directory_is_the_root(root: Path) -> None:
    whole = await listed(root, ".")
    assert [e["path"] for e in whole["entries"]] == ["b.txt", "docs"]
    for empty in ("", "  "):
        assert await listed(root, empty) == whole
    found = json.loads((await search_files(ctx(root), {"text": "mascot", "path": ""})).content)
    assert [m["path"] for m in found["matches"]] == ["b.txt", "docs/a.md"]


async def test_an_empty_file_path_is_refused_and_a_placeholder_is_told_the_root(
    root: Path,
) -> None:
    with pytest.raises(ToolError) as err:
        await read_file(ctx(root), {"path": ""})
    assert err.value.error_type == "PathOutsideWorkspace"
    with pytest.raises(ToolError) as err:
        await list_dir(ctx(root), {"path": "/path/to/workspace"})
    assert err.value.error_type == "PathOutsideWorkspace"
    assert "absolute paths are not accepted, and '.' is the root" in err.value.message
    assert err.value.message.endswith('cannot be read or written. Call list_dir with {"path": "."}')
    # A climb out is refused with no way in offered: offered one, the 1.5B model asked to read
    # ../../../etc/passwd tried again until stuck instead of saying it cannot.
    for tool, args in ((list_dir, {}), (read_file, {})):
        with pytest.raises(ToolError) as err:
            await tool(ctx(root), {**args, "path": "../../../etc/passwd"})
        assert err.value.message.endswith("a file outside it cannot be read or written")
        assert "'.'" not in err.value.message


def _unreachable(root: Path, tmp_path: Path) -> None:
    """What no tool reaches: secret.txt behind a symlink to outside, and .agent/'s file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s\n")
    (root / "link").symlink_to(outside)
    (root / ".agent").mkdir()
    (root / ".agent" / "effects.json").write_text("{}\n")


async def test_a_made_up_absolute_path_is_refused_naming_the_call_it_means(root: Path) -> None:
    # Told only that absolute paths are refused, the 0.5B model sent the same call again.
    async def refused(tool: Any, args: dict[str, Any]) -> str:
        with pytest.raises(ToolError) as err:
            await tool(ctx(root), args)
        assert err.value.error_type == "PathOutsideWorkspace"
        assert "absolute paths are not accepted" in err.value.message
        return err.value.message.rsplit(". ", 1)[1]

    # The longest tail naming what exists; the model's other arguments kept.
    assert await refused(list_dir, {"path": "/path/to/workspace", "recursive": True}) == (
        'Call list_dir with {"path": ".", "recursive": true}'
    )
    assert await refused(list_dir, {"path": "/workspace/docs/"}) == (
        'Call list_dir with {"path": "docs"}'
    )
    assert await refused(read_file, {"path": "/workspace/docs/a.md", "max_bytes": 9}) == (
        'Call read_file with {"path": "docs/a.md", "max_bytes": 9}'
    )
    assert await refused(search_files, {"text": "mascot", "path": "/ws/docs"}) == (
        'Call search_files with {"text": "mascot", "path": "docs"}'
    )
    # A file no tail names: the listing that shows the paths.
    listing = 'Call list_dir with {"path": ".", "recursive": true} to see the files\' paths'
    assert await refused(read_file, {"path": "/etc/passwd"}) == listing
    assert await refused(read_file, {"path": "/workspace/docs"}) == listing  # not a file


async def test_an_absolute_path_is_offered_only_what_the_tools_could_reach(
    root: Path, tmp_path: Path
) -> None:
    # Never a tail through a symlink (the tools follow none), in the reserved directory, or
    # out of the root: an offer must tell nothing a listing would not.
    _unreachable(root, tmp_path)
    listing = 'Call list_dir with {"path": ".", "recursive": true} to see the files\' paths'
    for path in ("/w/link/secret.txt", "/w/.agent/effects.json", "/w/../outside/secret.txt"):
        with pytest.raises(ToolError) as err:
            await read_file(ctx(root), {"path": path})
        assert err.value.message.endswith(listing), path
    with pytest.raises(ToolError) as err:
        await list_dir(ctx(root), {"path": "/w/link"})
    assert err.value.message.endswith('Call list_dir with {"path": "."}')


async def test_a_read_that_finds_no_file_names_the_call_to_make_instead(
    root: Path, tmp_path: Path
) -> None:
    # The 0.5B model read "notes/" and "summary.py" (which is src/summary.py) by turns until
    # stuck, told only "not a regular file" and "no such file".
    async def refused(path: str, **more: Any) -> str:
        with pytest.raises(ToolError) as err:
            await read_file(ctx(root), {"path": path, **more})
        return f"{err.value.error_type}: {err.value.message}"

    assert await refused("docs/") == (
        """NotAFile: 'docs' is a directory. Call list_dir with {"path": "docs"} to see its files"""
    )
    assert await refused("a.md", max_bytes=5) == (
        """FileNotFound: no such file: 'a.md'. Call read_file with {"path": "docs/a.md", """
        """"max_bytes": 5}"""
    )
    assert await refused("nowhere/a.md") == (
        """FileNotFound: no such file: 'nowhere/a.md'. Call read_file with {"path": "docs/a.md"}"""
    )
    (root / "more").mkdir()
    (root / "more" / "A.md").write_text("x\n")
    assert await refused("a.md") == (
        "FileNotFound: no such file: 'a.md'; files named 'a.md' are at 'docs/a.md', 'more/A.md'"
    )
    # A name found nowhere keeps the plain error, close names in its directory offered.
    assert await refused("zz.txt") == "FileNotFound: no such file: 'zz.txt'"
    assert await refused("b.tx") == "FileNotFound: no such file: 'b.tx' (did you mean 'b.txt'?)"
    # A name in another case in another directory is that file; in its own, a close name.
    assert await refused("docs/B.TXT") == (
        """FileNotFound: no such file: 'docs/B.TXT'. Call read_file with {"path": "b.txt"}"""
    )
    assert await refused("B.TXT") == "FileNotFound: no such file: 'B.TXT' (did you mean 'b.txt'?)"
    # Nothing offered a listing would not show: not behind a symlink, not in .agent/.
    _unreachable(root, tmp_path)
    assert await refused("secret.txt") == "FileNotFound: no such file: 'secret.txt'"
    assert await refused("effects.json") == "FileNotFound: no such file: 'effects.json'"


async def test_listings_and_misses_leave_no_file_descriptor_open(root: Path) -> None:
    # Each directory a listing scanned kept one descriptor open (a duplicate scandir never
    # closed): a worker listing all day would run out of them.
    (root / "docs" / "deep").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        await list_dir(ctx(root), {"path": ".", "recursive": True})
        await search_files(ctx(root), {"text": "mascot"})
        with pytest.raises(ToolError):
            await read_file(ctx(root), {"path": "a.md"})  # walks the workspace for it
    assert len(os.listdir("/proc/self/fd")) <= before
