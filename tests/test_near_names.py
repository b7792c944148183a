"""A missing file's or directory's error offers the close names of the same directory
("did you mean ...?"); a probe that only asks whether a path exists (a write's look at what
the file holds) scans for none."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable_agents.activities.tools import fd_walk
from durable_agents.activities.tools import files as files_module
from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.files import read_file, write_file


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path


def ctx(ws: Path, key: str = "call-1") -> ToolContext:
    return ToolContext(idempotency_key=key, workspace=ws, tenant_id="t1", session_id="s1")


async def test_a_write_looks_for_what_the_file_holds_without_scanning_for_close_names(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each write reads the file first (to say unchanged); a file or directory that does not
    # exist yet is no mistake to offer names for, and a directory of thousands would be read.
    def scan(*_: object) -> str:
        raise AssertionError("a write scanned a directory for close names")

    monkeypatch.setattr(files_module, "did_you_mean", scan)
    monkeypatch.setattr(fd_walk, "did_you_mean", scan)
    (ws / "out").mkdir()
    for n in range(3):
        (ws / "out" / f"r{n}.md").write_text("x")
    assert (await write_file(ctx(ws), {"path": "out/r9.md", "content": "new"})).changed
    assert (await write_file(ctx(ws, "c2"), {"path": "new/dir/r.md", "content": "new"})).changed


async def test_a_missing_path_offers_the_close_names_beside_it(ws: Path) -> None:
    (ws / "notes").mkdir()
    (ws / "notes" / "2026-11-24-standup.md").write_text("x")
    (ws / "notes" / "todo.txt").write_text("x")
    (ws / ".agent").mkdir()
    (ws / "readme.md").write_text("x")

    async def missing(path: str) -> str:
        with pytest.raises(ToolError) as err:
            await read_file(ctx(ws), {"path": path})
        assert err.value.error_type == "FileNotFound"
        return str(err.value)

    assert await missing("notes/2026-10-24-standup.md") == (
        "no such file: 'notes/2026-10-24-standup.md' (did you mean 'notes/2026-11-24-standup.md'?)"
    )
    # A file of that name elsewhere is the read to make (tests/test_directory_arguments.py).
    assert await missing("note/todo.txt") == (
        """no such file: 'note/todo.txt'. Call read_file with {"path": "notes/todo.txt"}"""
    )
    assert await missing("note/plan.txt") == "no such directory: 'note' (did you mean 'notes'?)"
    assert await missing("notes/unrelated.csv") == "no such file: 'notes/unrelated.csv'"
    # The reserved directory is never offered.
    assert await missing(".agen") == "no such file: '.agen'"
    assert await missing("README.md") == "no such file: 'README.md' (did you mean 'readme.md'?)"
