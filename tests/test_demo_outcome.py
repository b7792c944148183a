"""`agentctl demo` judges its task by the demo's goal, which is also the task's own check: a
completed task that wrote no report, one that leaves files out, or one that lists names
without saying what the files hold, is not done, and the demo exits non-zero."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from durable_agents.activities.checks.runner import CHECK_READ_BYTES, MAX_REASON_CHARS
from durable_agents.activities.checks.spec import CallDone, CheckContext
from durable_agents.workers.demo.outcome import check_report, survey_gaps, workspace_files
from durable_agents.workers.demo.run import _prepare_dirs
from durable_agents.workers.demo.survey import covers_each_file

REPORT = "out/report.md"
DEMO = Path(__file__).resolve().parents[1] / "workers" / "demo" / "workspace"
CONTENTS = {
    "README.md": "# Weather station project\n",
    "data/readings.csv": "station,temperature_c\nA,4.1\n",
    "notes/standup.md": "Station B dropped readings; suspect the modem.\n",
}


def _seeded(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "ws"
    for name, text in CONTENTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root, workspace_files(root)


def test_a_completed_task_without_the_report_is_not_done(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    goal = check_report("completed", root, REPORT, files)
    assert (goal.present, goal.done) == (False, False)
    assert goal.line() == ("task completed; report out/report.md: NOT written; demo goal NOT done")


def test_a_report_covering_every_file_is_done_by_path_or_by_name(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / REPORT).write_text(
        "# Survey\n- README.md: a weather station project\n"
        "- data/readings.csv: temperature per station\n- standup.md: a modem fault\n"
    )
    goal = check_report("completed", root, REPORT, files)
    assert goal.done and goal.named == 3
    assert "covers all 3 workspace files; demo goal done" in goal.line()
    # The same report from a task that then failed is not done either.
    assert not check_report("failed", root, REPORT, files).done


def test_a_report_leaving_files_out_is_not_done(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / REPORT).write_text("I looked at README.md.")
    goal = check_report("completed", root, REPORT, files)
    assert not goal.done
    assert goal.missing == ("README.md", "data/readings.csv", "notes/standup.md")
    assert "does not cover README.md, data/readings.csv, notes/standup.md" in goal.line()


def test_a_report_of_names_alone_is_not_a_survey(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / REPORT).write_text("Files: README.md, data/readings.csv, notes/standup.md.")
    goal = check_report("completed", root, REPORT, files)
    assert not goal.done and len(goal.missing) == 3
    # A word of the contents found only inside a name says nothing of them: a 1.5B's table of
    # names and sizes passed for the stand-up note ("Stand-up" in "standup.md").
    (root / "notes/standup.md").write_text("# Stand-up\n\nStation B dropped readings.\n")
    (root / REPORT).write_text("| notes/standup.md | 265 | file |\n| standup.md | note |\n")
    goal = check_report("completed", root, REPORT, files)
    assert "notes/standup.md" in goal.missing
    (root / REPORT).write_text("| notes/standup.md | the stand-up: station B dropped data |\n")
    assert "notes/standup.md" not in check_report("completed", root, REPORT, files).missing


def test_a_word_counts_only_for_the_file_it_is_said_of(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    (root / "out").mkdir()
    # "station" is in all three files; here it is said of the data file alone, so it says
    # nothing of the other two, which the report lists by size only.
    (root / REPORT).write_text(
        "- README.md: 26 bytes\n- data/readings.csv: columns station, temperature_c\n"
        "- notes/standup.md: 48 bytes\n"
    )
    goal = check_report("completed", root, REPORT, files)
    assert goal.missing == ("README.md", "notes/standup.md")
    # Nor do a file's words pasted below the list, under a heading of their own.
    (root / REPORT).write_text(
        "- README.md: a weather station project\n- data/readings.csv: temperature_c\n"
        "- notes/standup.md: 48 bytes\n\n## Summary\nStation B dropped readings; the modem.\n"
    )
    assert check_report("completed", root, REPORT, files).missing == ("notes/standup.md",)
    # Under its list item, even a pasted heading is the item's.
    (root / REPORT).write_text(
        "- README.md:\n  # Weather station project\n- data/readings.csv: temperature_c\n"
        "- notes/standup.md: 48 bytes\n  # Stand-up\n  the modem failed\n"
    )
    assert check_report("completed", root, REPORT, files).done
    # Said before the name on its line, or on the lines after it, it counts for that file.
    (root / REPORT).write_text(
        "Weather station project (README.md).\ndata/readings.csv: columns station,\n"
        "temperature_c.\nnotes/standup.md, about station B and the modem\n"
    )
    assert check_report("completed", root, REPORT, files).done


def test_a_line_led_by_a_files_name_is_said_of_that_file_alone(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / "src").mkdir()
    (root / "src/avg.py").write_text("def hourly_means(path):\n    return path\n")
    files = workspace_files(root)
    # As add_to_report writes it: another file named in a line's words does not cut them off.
    (root / REPORT).write_text(
        "- src/avg.py: reads data/readings.csv and returns hourly_means\n"
        "- README.md: a weather station project\n"
    )
    goal = check_report("completed", root, REPORT, files)
    # Nor does it say anything of the file named inside it: named there, never described.
    assert goal.missing == ("data/readings.csv", "notes/standup.md")
    # A name after a list mark and in bold leads too; another "NAME:" on the line ends it.
    (root / REPORT).write_text(
        "1. **src/avg.py**: from data/readings.csv, hourly_means\n"
        "- README.md: weather. data/readings.csv: temperature_c\n"
        "notes/standup.md: the modem\n"
    )
    assert check_report("completed", root, REPORT, files).done
    # Not led (no colon after it): the name of the data file ends what is said of the script.
    (root / REPORT).write_text(
        "- src/avg.py reads data/readings.csv and returns hourly_means\n"
        "- README.md: weather\n- notes/standup.md: the modem\n"
    )
    missing = check_report("completed", root, REPORT, files).missing
    assert missing == ("data/readings.csv", "src/avg.py")


def test_a_file_of_no_words_is_covered_by_its_name_and_one_of_shared_words_by_one(
    tmp_path: Path,
) -> None:
    root, _ = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / "data/empty.csv").write_text("")
    (root / "data/ids.csv").write_text("1,2\n3,4\n")
    (root / "notes/again.md").write_text("Station B dropped readings.\n")
    files = workspace_files(root)
    report = (
        "- README.md: the weather project\n- data/readings.csv: temperature_c\n"
        "- notes/standup.md: the modem\n- data/empty.csv: nothing\n- data/ids.csv: numbers\n"
        "- notes/again.md: a note\n"
    )
    (root / REPORT).write_text(report)
    # Nothing to say of the empty file and the numbers but their names; the note's words
    # are all the stand-up's too, so one of them is enough.
    assert check_report("completed", root, REPORT, files).missing == ("notes/again.md",)
    (root / REPORT).write_text(report.replace("a note", "B dropped out"))
    assert check_report("completed", root, REPORT, files).done


# A bound orders of magnitude above a read in one pass (~0.2 s) and far below one that goes
# back over the report for each name it finds (minutes for this report).
@pytest.mark.timeout(30)
def test_a_megabyte_report_naming_files_a_hundred_thousand_times_is_read_once() -> None:
    # The model writes the report: the check reads up to CHECK_READ_BYTES of it.
    report = ("README.md data/readings.csv " * 40_000)[:CHECK_READ_BYTES]
    assert len(report) == CHECK_READ_BYTES
    assert survey_gaps(report, CONTENTS) == ("README.md", "data/readings.csv", "notes/standup.md")
    report = ("- README.md: a weather station\n" * 40_000)[:CHECK_READ_BYTES]
    assert survey_gaps(report, CONTENTS) == ("data/readings.csv", "notes/standup.md")


def test_the_demo_workspace_is_what_the_report_must_name() -> None:
    state, _, root = _prepare_dirs(uuid.uuid4())
    try:
        files = workspace_files(root)
    finally:
        shutil.rmtree(state)
    assert REPORT not in files and len(files) == 4


async def test_the_survey_agents_check_names_the_next_call_and_never_reads_the_answer(
    tmp_path: Path,
) -> None:
    root, _ = _seeded(tmp_path)

    async def read_text(path: str) -> str | None:
        return (root / path).read_text() if (root / path).is_file() else None

    every_read = [CallDone("read_file", {"path": name}) for name in CONTENTS]
    ctx = CheckContext(
        answer="The report is written.", read_text=read_text, workspace=root, calls=every_read
    )
    # No report yet: the first call is named too, as for a report that names no file.
    assert (await covers_each_file(ctx) or "").startswith(
        "out/report.md was not written. Call read_file on README.md, then add_to_report with "
        "path README.md and a summary"
    )
    (root / "out").mkdir()
    (root / REPORT).write_text("README.md: the weather station project.\n")
    reason = await covers_each_file(ctx)
    # The next calls named outright, one file at a time, each added to what is there.
    assert reason == (
        "out/report.md does not name data/readings.csv, notes/standup.md. Call read_file on "
        "data/readings.csv, then add_to_report with path data/readings.csv and a summary of "
        "what it holds in your own words, naming things in it (a title, column names, "
        "function names), then the same for the other file"
    )
    # Named without a word of their contents, or their contents pasted without their names.
    (root / REPORT).write_text("Three files: README.md, data/readings.csv, notes/standup.md.\n")
    assert (await covers_each_file(ctx) or "").startswith(
        "out/report.md names nothing in README.md, data/readings.csv, notes/standup.md (only "
        "what follows a file's name, up to a blank line, counts). Call read_file on README.md, "
        "then add_to_report with path README.md and a summary"
    )
    (root / REPORT).write_text("# Weather station project\nStation B dropped readings.\n")
    assert (await covers_each_file(ctx) or "").startswith(
        "out/report.md does not name README.md, data/readings.csv, notes/standup.md. "
    )
    # The report alone decides these failures, so they stand until a tool changes the
    # files: neither the answer nor the calls were read.
    assert not ctx.answer_read and not ctx.calls_read
    (root / REPORT).write_text(
        "README.md: the weather station project. data/readings.csv: temperature by station. "
        "notes/standup.md: a modem problem.\n"
    )
    assert await covers_each_file(ctx) is None


async def test_the_survey_checks_longest_reason_on_the_demo_workspace_is_said_whole(
    tmp_path: Path,
) -> None:
    # Every file named and none said: both faults and the most files to name. The loop cuts a
    # reason past MAX_REASON_CHARS, and a cut reason loses the next call it names.
    state, _, root = _prepare_dirs(uuid.uuid4())
    try:
        files = workspace_files(root)
        (root / "out").mkdir()
        (root / REPORT).write_text("Files: " + ", ".join(files) + "\n")

        async def read_text(path: str) -> str | None:
            return (root / path).read_text() if (root / path).is_file() else None

        reads = [CallDone("read_file", {"path": name}) for name in files]
        ctx = CheckContext(answer="", read_text=read_text, workspace=root, calls=reads)
        reason = await covers_each_file(ctx) or ""
    finally:
        shutil.rmtree(state)
    assert reason.startswith("out/report.md names nothing in") and len(files) == 4
    assert len(reason) <= MAX_REASON_CHARS and reason.endswith("the same for the other 3 files")


def test_a_line_guessed_from_the_other_files_words_does_not_cover_a_file() -> None:
    # Every word of the guess is one the script holds, but other files hold it too: a model
    # that never read the script wrote it from the README and the data file.
    files = {p.relative_to(DEMO).as_posix(): p.read_text() for p in DEMO.rglob("*") if p.is_file()}
    said = {
        "README.md": "the weather station project",
        "data/readings.csv": "temperature and humidity by station",
        "notes/2026-11-24-standup.md": "the stand-up of 24 November",
        "src/summary.py": "the summary code for the weather station project",
    }
    report = "".join(f"- {path}: {words}\n" for path, words in said.items())
    assert survey_gaps(report, files) == ("src/summary.py",)
    # A word only the script holds covers it; "humidity" says the data file's humidity_pct.
    report += "- src/summary.py: hourly means of the readings, kept in a defaultdict\n"
    assert survey_gaps(report, files) == ()


async def test_a_line_on_a_file_the_task_never_read_does_not_pass(tmp_path: Path) -> None:
    root, _ = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / REPORT).write_text(
        "- README.md: the weather station project\n- data/readings.csv: temperature_c per "
        "station\n- notes/standup.md: a modem fault\n"
    )

    async def read_text(path: str) -> str | None:
        return (root / path).read_text() if (root / path).is_file() else None

    def ctx(*read: str) -> CheckContext:
        calls = [CallDone("read_file", {"path": f"./{name}"}) for name in read]
        # A failed read is not among a task's calls done; other tools' calls read nothing.
        calls.append(CallDone("list_dir", {"path": "notes/standup.md"}))
        return CheckContext(answer="", read_text=read_text, workspace=root, calls=calls)

    guessed = ctx("README.md", "data/readings.csv")
    reason = await covers_each_file(guessed) or ""
    # A read can mend this one: the calls were read, so answers are offered after a read.
    assert guessed.calls_read
    assert reason.startswith(
        "out/report.md describes notes/standup.md, never read. Call read_file on "
        "notes/standup.md, then add_to_report"
    )
    assert await covers_each_file(ctx(*CONTENTS)) is None
