"""What `agentctl demo` checks after its task: the demo's goal is known (a report at
out/report.md that names the workspace's files), so "the task completed" is not taken for
"the task did what it was asked"; a real model can end a task with no report at all."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from durable_agents.vocabulary.session_status import SessionStatus

# A report bigger than this is not read whole to look for names (the demo's is ~1 KB).
_MAX_REPORT_BYTES = 1_000_000


@dataclass(frozen=True)
class DemoOutcome:
    status: str
    report: str  # the report's path in the workspace
    present: bool
    # Workspace files the report does not name (by path or by file name).
    missing: tuple[str, ...] = ()
    named: int = 0

    @property
    def done(self) -> bool:
        """The task completed and did what it was asked."""
        return self.status == SessionStatus.COMPLETED and self.present and not self.missing

    def line(self) -> str:
        """The outcome in one line of our own words (no report text)."""
        if not self.present:
            found = f"report {self.report}: NOT written"
        elif self.missing:
            shown = ", ".join(self.missing[:10])
            found = f"report {self.report}: present, but it does not name {shown}"
        else:
            found = f"report {self.report}: present, names all {self.named} workspace files"
        verdict = "done" if self.done else "NOT done"
        return f"task {self.status}; {found}; demo goal {verdict}"


def workspace_files(root: Path) -> list[str]:
    """The files the demo seeds (relative POSIX paths), read before the task writes any."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def check_report(status: str, root: Path, report: str, expected: list[str]) -> DemoOutcome:
    """Whether `report` (relative to `root`) exists and names every file of `expected`."""
    path = root / report
    if not path.is_file():
        return DemoOutcome(status, report, present=False)
    with path.open("rb") as f:
        text = f.read(_MAX_REPORT_BYTES).decode("utf-8", errors="replace")
    missing = tuple(
        name
        for name in expected
        if name != report and name not in text and PurePosixPath(name).name not in text
    )
    named = sum(1 for name in expected if name != report) - len(missing)
    return DemoOutcome(status, report, present=True, missing=missing, named=named)
