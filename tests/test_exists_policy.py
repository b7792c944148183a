"""The `exists:ARG` approval policy and what holds a call it let through unasked: checked
like every policy at every door, looked up below the workspace root without following
symlinks or creating anything, and a file tool told its path must be new never replaces
what appeared meanwhile."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.policies.approval_policy import (
    PolicyError,
    existence_args,
    needs_approval,
    validate,
)
from durable_agents.activities.policies.task_rules import InvalidTaskInput, check_policies
from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.activities.tools.file_edits import edit_file
from durable_agents.activities.tools.files import write_file
from durable_agents.activities.tools.tool_schema import ToolDefinitionError
from durable_agents.activities.tools.typed import tool
from durable_agents.activities.tools.workspace_probe import names_entry


def test_exists_names_one_argument() -> None:
    assert validate("exists:path") == "exists:path"
    for bad in ("exists", "exists:", "exists:a:b", "exists:1st", "exists:path\n", "exists: path"):
        with pytest.raises(PolicyError, match="exists:ARG"):
            validate(bad)
    # The same rule at the doors, which check a task's policies before anything commits.
    with pytest.raises(InvalidTaskInput, match="exists:ARG"):
        check_policies("approval_policies", {"write_file": "exists:"})
    with pytest.raises(ToolDefinitionError):
        tool(effect="effectful", approval="exists:")


def test_exists_asks_when_its_argument_names_something_or_nobody_can_look() -> None:
    there = {"a.txt"}.__contains__
    assert needs_approval("exists:path", {"path": "a.txt"}, there) is True
    assert needs_approval("exists:path", {"path": "b.txt"}, there) is False
    # No workspace to look at (a device's tool, a packed workspace): ask.
    assert needs_approval("exists:path", {"path": "b.txt"}, None) is True
    assert existence_args(("always", "exists:path", "exists:target")) == {"path", "target"}
    assert existence_args(("never", "outside:out")) == frozenset()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "dir").mkdir(parents=True)
    (root / "dir/a.txt").write_text("a")
    (root / "f.txt").write_text("f")
    (root / "link").symlink_to(root / "dir")
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    return root


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("dir/a.txt", True),
        ("dir", True),
        ("dangling", True),  # the link itself is there; write_file refuses it anyway
        ("./dir/../f.txt", True),
        ("dir/b.txt", False),
        ("missing/b.txt", False),
        ("f.txt/b.txt", False),  # through a file: no tool reaches it
        ("link/a.txt", False),  # through a symlink: no tool follows it
        ("../ws/f.txt", False),  # outside the root
        (".agent/x", False),  # reserved: no tool touches it
        (7, False),
        (None, False),
    ],
)
def test_names_entry_looks_as_the_file_tools_walk(ws: Path, raw: Any, named: bool) -> None:
    assert names_entry(ws, raw) is named


def test_names_entry_creates_no_workspace(tmp_path: Path) -> None:
    assert names_entry(tmp_path / "never-used", "a.txt") is False
    assert not (tmp_path / "never-used").exists()


def _unasked(root: Path) -> ToolContext:
    return ToolContext("k", root, "t", "s", must_be_new=frozenset({"path"}))


async def test_an_unasked_write_never_replaces_what_appeared(ws: Path) -> None:
    first = os.stat(ws / "f.txt")
    with pytest.raises(ToolError) as err:
        await write_file(_unasked(ws), {"path": "f.txt", "content": "the model's"})
    assert err.value.error_type == "FileExists" and "nothing was done" in err.value.message
    after = os.stat(ws / "f.txt")
    assert (after.st_ino, after.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    await write_file(_unasked(ws), {"path": "dir/new.txt", "content": "new"})
    assert (ws / "dir/new.txt").read_text() == "new"
    assert sorted(os.listdir(ws / "dir")) == ["a.txt", "new.txt"]  # no temp file left


async def test_an_unasked_edit_edits_nothing(ws: Path) -> None:
    args = {"path": "f.txt", "old_text": "f", "new_text": "g"}
    with pytest.raises(ToolError) as err:
        await edit_file(_unasked(ws), args)
    assert err.value.error_type == "FileExists"
    assert (ws / "f.txt").read_text() == "f"
    with pytest.raises(ToolError) as err:
        await edit_file(_unasked(ws), {**args, "path": "gone.txt"})
    assert err.value.error_type == "FileNotFound"


def test_the_model_is_told_to_edit_existing_files_with_edit_file() -> None:
    tools = {t.spec.name: t.spec for t in builtin_tools("write_file", "edit_file")}
    assert "use edit_file" in tools["write_file"].description
    assert "Prefer it to write_file" in tools["edit_file"].description
    assert tools["edit_file"].parameters["required"] == ["path", "old_text", "new_text"]
