"""The survey's add_to_report: a line `- PATH: WORDS` on a workspace file, one line whatever
the model sends, added to out/report.md; a path naming no file of the workspace (or the
report itself, or a file under out/), empty or overlong words and a line the survey's check
would not count are refused, saying why, and nothing is written; an interrupted call is
settled from the report's end."""

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
    told = await _add(root, "./data/readings.csv", "  station, timestamp and\thumidity_pct  ")
    assert (root / REPORT).read_text() == (
        "- README.md: The weather station project: three rooftop stations.\n"
        "- data/readings.csv: station, timestamp and humidity_pct\n"
    )
    assert told["line"] == 2 and told["path"] == REPORT and told["already_applied"] is False
    # What is left, and the next call: the files not covered, in the listing's order.
    assert told["files_left"] == ["notes/2026-11-24-standup.md", "src/summary.py"]
    assert told["next"] == "read_file notes/2026-11-24-standup.md, then add_to_report on it"
    # What the line says counts for its file: a blank line in the words cannot cut it off.
    gaps = survey_gaps((root / REPORT).read_text(), {"README.md": (root / "README.md").read_text()})
    assert gaps == ()


async def test_refused_lines_write_nothing_and_say_why(root: Path) -> None:
    (root / "out").mkdir()
    (root / "out" / "draft.md").write_text("a draft of the weather report\n")
    first = "- README.md: the weather station project\n"
    (root / REPORT).write_text(first)
    csv = "data/readings.csv"
    refused = {
        ("notes/standup.md", "a stand-up"): ("FileNotFound", "standup.md"),
        ("../etc/passwd", "users"): ("PathOutsideWorkspace", ""),
        ("src", "the code"): ("NotAFile", ""),
        (REPORT, "the report"): ("InvalidArguments", "is the report"),
        ("out/draft.md", "a draft"): ("InvalidArguments", "under out/"),
        (csv, " \n\t "): ("InvalidArguments", "summary is empty"),
        (csv, "x" * (MAX_SAID_CHARS + 1)): ("InvalidArguments", "at most"),
        # Words the other files hold too: a line a guess from them could write. Refused as
        # the next call, naming words that would count.
        (csv, "the readings from the three rooftop stations"): (
            "InvalidArguments",
            "this line would not count for data/readings.csv: it does not name anything only "
            "that file holds. Write a different summary of data/readings.csv that names things "
            "only it holds, such as humidity_pct, and call add_to_report with it",
        ),
        # Offered first, the names joined by "_" a file defines or heads its columns with.
        ("src/summary.py", "the summary script"): (
            "InvalidArguments",
            "names things only it holds, such as hourly_means, import, collections,",
        ),
        # Only what a file's name says ("readings"): a list of names has it.
        (csv, "the readings"): ("InvalidArguments", "it does not name anything only that file"),
    }
    for (path, summary), (kind, says) in refused.items():
        with pytest.raises(ToolError) as err:
            await _add(root, path, summary)
        assert err.value.error_type == kind, (path, err.value)
        assert says in err.value.message, (says, err.value.message)
    assert (root / REPORT).read_text() == first
    # Two of the file's words count, and the line is added.
    await _add(root, csv, "the readings of each station with a timestamp")
    assert (root / REPORT).read_text().count("\n") == 2
    # A file whose words the other files all hold: any one of them would count.
    (root / "notes" / "again.md").write_text("Station B dropped readings.\n")
    with pytest.raises(ToolError) as err:
        await _add(root, "notes/again.md", "a note")
    assert err.value.message == (
        "this line would not count for notes/again.md: it does not name anything that file "
        "holds. "
        "Write a different summary of notes/again.md that names things in it, such as "
        "Station, dropped, and call add_to_report with it"
    )


async def test_a_line_that_says_nothing_of_its_file_leaves_it_to_cover(root: Path) -> None:
    (root / "out").mkdir()
    # A line of an earlier writer, on README.md, that says nothing of it.
    (root / REPORT).write_text("- README.md: a file\n")
    told = await _add(root, "data/readings.csv", "the humidity readings")
    assert told["files_left"] == [
        "README.md",
        "notes/2026-11-24-standup.md",
        "src/summary.py",
    ]
    assert told["next"] == "read_file README.md, then add_to_report on it"


async def test_an_interrupted_line_that_landed_is_not_added_again(root: Path) -> None:
    args = {"path": "README.md", "summary": "the rooftop weather project"}
    assert add_to_report_tool.reconcile is not None
    # Not there yet: safe to run.
    assert await add_to_report_tool.reconcile(_ctx(root), args) is None
    await _add(root, "data/readings.csv", "station humidity readings")
    await _add(root, **args)
    done = await add_to_report_tool.reconcile(_ctx(root), args)
    assert done is not None and json.loads(done.content)["already_applied"] is True
    assert (root / REPORT).read_text().count("README.md") == 1


async def test_after_the_last_file_it_says_to_answer_and_a_line_on_the_report_is_refused(
    root: Path,
) -> None:
    lines = {
        "README.md": "a rooftop weather project",
        "data/readings.csv": "humidity readings",
        "notes/2026-11-24-standup.md": "a modem dropped readings",
    }
    for path, summary in lines.items():
        await _add(root, path, summary)
    told = await _add(root, "src/summary.py", "hourly_means over the readings")
    assert told["files_left"] == []
    assert told["next"] == "every file has its line: answer now"
    with pytest.raises(ToolError) as err:
        await _add(root, REPORT, "the report")
    assert err.value.message == (
        "out/report.md is the report, not a file it covers; next: every file has its line: "
        "answer now"
    )


async def test_a_line_on_the_report_names_the_path_its_line_should_have(root: Path) -> None:
    # Told "read_file X, then add_to_report on it" right after reading X, the 1.5B model
    # read X again and sent the same line on the report.
    await _add(root, "README.md", "a rooftop weather project")
    with pytest.raises(ToolError) as err:
        await _add(root, REPORT, "the weather station project's report")
    assert err.value.message == (
        "out/report.md is the report, not a file it covers; next: add_to_report with path "
        "data/readings.csv and a summary of what data/readings.csv holds"
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
