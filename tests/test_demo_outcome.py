"""`agentctl demo` judges its task by the demo's goal (issue 30): a completed task that wrote
no report, or one that leaves files out, is not done, and the demo exits non-zero."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from durable_agents.workers.demo.outcome import check_report, workspace_files
from durable_agents.workers.demo.run import _prepare_dirs

REPORT = "out/report.md"


def _seeded(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "ws"
    for name in ("README.md", "data/readings.csv", "notes/standup.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    return root, workspace_files(root)


def test_a_completed_task_without_the_report_is_not_done(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    goal = check_report("completed", root, REPORT, files)
    assert (goal.present, goal.done) == (False, False)
    assert goal.line() == ("task completed; report out/report.md: NOT written; demo goal NOT done")


def test_a_report_naming_every_file_is_done_by_path_or_by_name(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / REPORT).write_text("# Survey\n- README.md\n- data/readings.csv\n- standup.md\n")
    goal = check_report("completed", root, REPORT, files)
    assert goal.done and goal.named == 3
    assert "names all 3 workspace files; demo goal done" in goal.line()
    # The same report from a task that then failed is not done either.
    assert not check_report("failed", root, REPORT, files).done


def test_a_report_leaving_files_out_is_not_done(tmp_path: Path) -> None:
    root, files = _seeded(tmp_path)
    (root / "out").mkdir()
    (root / REPORT).write_text("I looked at README.md.")
    goal = check_report("completed", root, REPORT, files)
    assert not goal.done
    assert goal.missing == ("data/readings.csv", "notes/standup.md")
    assert "does not name data/readings.csv, notes/standup.md" in goal.line()


def test_the_demo_workspace_is_what_the_report_must_name() -> None:
    state, _, root = _prepare_dirs(uuid.uuid4())
    try:
        files = workspace_files(root)
    finally:
        shutil.rmtree(state)
    assert REPORT not in files and len(files) == 4
