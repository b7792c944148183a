"""search_files: the lines holding a text, inside the workspace only, bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.search import MAX_FILE_BYTES, MAX_MATCHES, search_files


def ctx(root: Path) -> ToolContext:
    return ToolContext(idempotency_key="k", workspace=root, tenant_id="t", session_id="s")


async def search(root: Path, **args: Any) -> dict[str, Any]:
    return dict(json.loads((await search_files(ctx(root), args)).content))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "docs/alpha.md").write_text("# Alpha\n\nThe alpha project ships soil sensors.\n")
    (ws / "docs/beta.md").write_text("# Beta\n\nThe beta team's Mascot is a flamingo, Rosa.\n")
    (ws / "notes.txt").write_text("no mascot here? yes: mascot\n")
    return ws


async def test_lines_holding_the_text_any_case_with_their_numbers(root: Path) -> None:
    found = await search(root, text="MASCOT")
    assert found["matches"] == [
        {"path": "docs/beta.md", "line": 3, "text": "The beta team's Mascot is a flamingo, Rosa."},
        {"path": "notes.txt", "line": 1, "text": "no mascot here? yes: mascot"},
    ]
    assert (found["files_searched"], found["truncated"]) == (3, False)
    below = await search(root, text="mascot", path="docs")
    assert [m["path"] for m in below["matches"]] == ["docs/beta.md"]


async def test_what_is_not_searched(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("mascot: outside\n")
    os.symlink(secret, root / "docs/outside.md")  # a symlink out is not even listed
    os.symlink("beta.md", root / "docs/inner.md")  # one in is listed, never followed
    (root / ".agent").mkdir()
    (root / ".agent/state.txt").write_text("mascot in the reserved dir\n")
    (root / "image.bin").write_bytes(b"\0\1mascot\n")
    (root / "big.txt").write_bytes(b"mascot\n" + b"x" * MAX_FILE_BYTES)
    found = await search(root, text="mascot")
    assert {m["path"] for m in found["matches"]} == {"docs/beta.md", "notes.txt"}
    assert found["files_skipped"] == 1  # big.txt


async def test_matches_past_the_limit_are_cut_and_said_so(root: Path) -> None:
    (root / "many.txt").write_text("mascot\n" * (MAX_MATCHES + 10))
    found = await search(root, text="mascot")
    assert len(found["matches"]) == MAX_MATCHES and found["truncated"] is True


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"text": "x", "path": "../.."}, "PathOutsideWorkspace"),
        ({"text": "x", "path": "/etc"}, "PathOutsideWorkspace"),
        ({"text": "   "}, "InvalidArguments"),
        ({"text": "x" * 201}, "InvalidArguments"),
        ({"text": "x", "path": "missing"}, "FileNotFound"),
    ],
)
async def test_bad_arguments_are_errors_the_model_can_act_on(
    root: Path, args: dict[str, Any], error: str
) -> None:
    with pytest.raises(ToolError) as caught:
        await search(root, **args)
    assert caught.value.error_type == error
