"""The survey's add_to_report: a line `- PATH: WORDS` on a workspace file, one line whatever
the model sends, added to out/report.md; a path naming no file of the workspace (or the
report itself) and empty or overlong words are refused and nothing is written; an
interrupted call is settled from the report's end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.workers.demo.outcome import survey_gaps
from durable_agents.workers.demo.report_lines import MAX_SAID_CHARS, add_to_report_tool

DEMO = Path(__file__).resolve().parents[1] / "workers" / "demo" / "workspace"
REPORT = "out/report.md"


def _ctx(root: Path) -> ToolContext:
    return ToolContext(idempotency_key="k", workspace=root, tenant_id="t", session_id="s")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shutil.copytree(DEMO, tmp_path, dirs_exist_ok=True)
    return tmp_path


async def _add(root: Path, path: str, summary: str) -> dict[str, object]:
    out = await add_to_report_tool.fn(_ctx(root), {"path": path, "summary": summary})
    told: dict[str, object] = json.loads(out.content)
    return told


async def test_a_line_is_the_path_then_the_words_on_one_line(root: Path) -> None:
    await _add(root, "README.md", "The weather station project:\n\nthree rooftop stations.")
    told = await _add(root, "./data/readings.csv", "  station, timestamp and\ttemperature_c  ")
    assert (root / REPORT).read_text() == (
        "- README.md: The weather station project: three rooftop stations.\n"
        "- data/readings.csv: station, timestamp and temperature_c\n"
    )
    assert told["line"] == 2 and told["path"] == REPORT and told["already_applied"] is False
    # What is left, and the next call: the files without a line, in the listing's order.
    assert told["files_without_a_line"] == ["notes/2026-11-24-standup.md", "src/summary.py"]
    assert told["next"] == "read_file notes/2026-11-24-standup.md, then add_to_report on it"
    # What the line says counts for its file: a blank line in the words cannot cut it off.
    gaps = survey_gaps((root / REPORT).read_text(), {"README.md": (root / "README.md").read_text()})
    assert gaps == ()


async def test_a_made_up_path_the_report_itself_and_empty_or_long_words_write_nothing(
    root: Path,
) -> None:
    (root / "out").mkdir()
    (root / REPORT).write_text("- README.md: the weather station project\n")
    refused = {
        ("notes/standup.md", "a stand-up"): "FileNotFound",
        ("../etc/passwd", "users"): "PathOutsideWorkspace",
        ("src", "the code"): "NotAFile",
        (REPORT, "the report"): "InvalidArguments",
        ("README.md", " \n\t "): "InvalidArguments",
        ("README.md", "x" * (MAX_SAID_CHARS + 1)): "InvalidArguments",
    }
    for (path, summary), kind in refused.items():
        with pytest.raises(ToolError) as err:
            await _add(root, path, summary)
        assert err.value.error_type == kind, (path, err.value)
    assert (root / REPORT).read_text() == "- README.md: the weather station project\n"


async def test_an_interrupted_line_that_landed_is_not_added_again(root: Path) -> None:
    args = {"path": "README.md", "summary": "the weather station project"}
    assert add_to_report_tool.reconcile is not None
    # Not there yet: safe to run.
    assert await add_to_report_tool.reconcile(_ctx(root), args) is None
    await _add(root, "data/readings.csv", "station readings")
    await _add(root, **args)
    done = await add_to_report_tool.reconcile(_ctx(root), args)
    assert done is not None and json.loads(done.content)["already_applied"] is True
    assert (root / REPORT).read_text().count("README.md") == 1


async def test_after_the_last_file_it_says_to_answer_and_a_line_on_the_report_is_refused(
    root: Path,
) -> None:
    for path in ("README.md", "data/readings.csv", "notes/2026-11-24-standup.md"):
        await _add(root, path, "words")
    told = await _add(root, "src/summary.py", "hourly_means over the readings")
    assert told["files_without_a_line"] == []
    assert told["next"] == "every file has its line: answer now"
    with pytest.raises(ToolError) as err:
        await _add(root, REPORT, "the report")
    assert err.value.message == (
        "out/report.md is the report, not a file it covers; next: every file has its line: "
        "answer now"
    )


async def test_the_same_line_again_is_not_added_and_says_so(root: Path) -> None:
    await _add(root, "README.md", "the weather station project")
    out = await add_to_report_tool.fn(
        _ctx(root), {"path": "./README.md", "summary": "the weather  station project"}
    )
    told = json.loads(out.content)
    assert not out.changed and told["unchanged"] is True
    assert (root / REPORT).read_text() == "- README.md: the weather station project\n"
    assert told["next"] == "read_file data/readings.csv, then add_to_report on it"
