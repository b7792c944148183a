"""A directory argument of list_dir and search_files: "" names the workspace root, as "."
does (a small model sends "" for "everything"); an empty file path is still refused, and an
absolute directory is refused saying what names the root."""

from __future__ import annotations

import json
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
    # A climb out is refused with no way in offered: offered one, the 1.5B model asked to read
    # ../../../etc/passwd tried again until stuck instead of saying it cannot.
    for tool, args in ((list_dir, {}), (read_file, {})):
        with pytest.raises(ToolError) as err:
            await tool(ctx(root), {**args, "path": "../../../etc/passwd"})
        assert err.value.message.endswith("a file outside it cannot be read or written")
        assert "'.'" not in err.value.message
