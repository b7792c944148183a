"""What the demo's task must do, as its own check and as `agentctl demo` reports it: a
report at out/report.md that covers every workspace file, naming it and saying there
something its contents hold (a word of five letters or more from it), so a listing of names
is not a survey, nor one file's words standing in for another's. "The task completed" is
not taken for "the task did what it was asked"."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from durable_agents.vocabulary.session_status import SessionStatus

# A report bigger than this is not read whole to look for names (the demo's is ~1 KB).
_MAX_REPORT_BYTES = 1_000_000
# A word that shows a file was read: five letters or more (not a number, not "a", "the").
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{4,}")


@dataclass(frozen=True)
class DemoOutcome:
    status: str
    report: str  # the report's path in the workspace
    present: bool
    # Workspace files the report does not cover (name, and say something of).
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
            found = f"report {self.report}: present, but it does not cover {shown}"
        else:
            found = f"report {self.report}: present, covers all {self.named} workspace files"
        verdict = "done" if self.done else "NOT done"
        return f"task {self.status}; {found}; demo goal {verdict}"


def workspace_files(root: Path) -> list[str]:
    """The files the demo seeds (relative POSIX paths), read before the task writes any."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# The files a survey covers: at most this many, each read up to the check's own limit.
MAX_SURVEYED = 50
# Where the task writes (its report): no file under it is surveyed.
OUT_DIR = "out"


def surveyed_files(root: Path) -> list[str]:
    """The files a survey of `root` covers, as a task finds them: every regular file but
    those under OUT_DIR (where the report goes) and symlinks, sorted."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.relative_to(root).parts[0] != OUT_DIR
    )


def survey_gaps(report: str, files: Mapping[str, str]) -> tuple[str, ...]:
    """The files of `files` (path -> contents) that `report` does not name (by path or file
    name), or names without saying, where it names the file, a word the file holds that no
    file's path does: one no other file holds, or two it shares (see _says)."""
    said = _said_of(report, files)
    words, held = _own_words(files)
    gaps = []
    for path, own in words.items():
        where = said[path]
        if where is None or not _says(where, own, held):
            gaps.append(path)
    return tuple(gaps)


def words_that_count(path: str, files: Mapping[str, str], limit: int) -> tuple[list[str], bool]:
    """Up to `limit` words of `path` that a line on it can name to count for it, as the file
    writes them, and whether they are its own (no other file holds them): its own when it
    has any, else its words (any one of which counts). Names joined by "_" first (a column,
    a function), then the rest, each in the order the file has them."""
    words, held = _own_words(files)
    mine = {w for w in words[path] if held[w] == 1}
    wanted = mine or words[path]
    found: dict[str, str] = {}
    for match in _WORD.finditer(files[path]):
        word = match.group()
        if word.casefold() in wanted:
            found.setdefault(word.casefold(), word)
    ordered = sorted(found.values(), key=lambda word: "_" not in word)
    return ordered[:limit], bool(mine)


def _own_words(files: Mapping[str, str]) -> tuple[dict[str, set[str]], Counter[str]]:
    """Each file's words but those of any file's path (a list of names has those, which
    shows nothing of what a file holds), and how many files hold each."""
    names = {w.casefold() for path in files for w in _WORD.findall(path)}
    words = {path: _words_of(text) - names for path, text in files.items()}
    return words, Counter(w for own in words.values() for w in own)


def _says(where: str, own: set[str], held: Counter[str]) -> bool:
    """Whether `where` says something of a file whose words are `own`: one word no other
    file holds, or two it shares with others. One shared word is what a line guessed from
    the other files holds ("the summary code for the weather station project", of a script
    never read, has its "station"); a file holding no word of its own needs one of them,
    and one holding no word at all (empty, or numbers) only its name."""
    if not own:  # nothing to say of it (empty, or numbers): naming it is all there is
        return True
    found = [w for w in own if w in where]
    if any(held[w] == 1 for w in found):
        return True
    shared_only = all(held[w] > 1 for w in own)
    return len(found) >= (1 if shared_only else 2)


def _words_of(text: str) -> set[str]:
    """The words of `text` (casefolded), and the parts of those joined by "_" that are words
    themselves: "temperature_c" is said by "temperature"."""
    found = {w.casefold() for w in _WORD.findall(text)}
    return found | {part for w in found if "_" in w for part in _WORD.findall(w.replace("_", " "))}


def unnamed_in(report: str, files: Mapping[str, str]) -> tuple[str, ...]:
    """The files of `files` that `report` names neither by path nor by file name."""
    said = _said_of(report, files)
    return tuple(path for path in files if said[path] is None)


def _said_of(report: str, files: Mapping[str, str]) -> dict[str, str | None]:
    """What `report` says where it names each file (None: it names it nowhere): from the
    start of the line that names it (or the end of a name before it on that line) to the
    next name or the end of its paragraph (a blank line or a heading). The names themselves
    are blanked: "Stand-up" is not said by "standup.md". A word said of another file, or
    under a heading of its own, is not said of this one: the data file's column names do not
    describe the script that reads them, nor a note pasted below the list the last file."""
    text = report.casefold()
    mentions: list[tuple[int, int, tuple[str, ...]]] = []  # start, end, the files it names
    blank = text
    # Paths first, longest first, each blanked as found: "notes/readme.md" is not "readme.md".
    spellings: dict[str, set[str]] = {}
    for path in files:
        spellings.setdefault(path.casefold(), set()).add(path)
    for path in files:
        spellings.setdefault(PurePosixPath(path).name.casefold(), set()).add(path)
    for spelled in sorted(spellings, key=len, reverse=True):
        for found in re.finditer(re.escape(spelled), blank):
            mentions.append((found.start(), found.end(), tuple(sorted(spellings[spelled]))))
        blank = blank.replace(spelled, " " * len(spelled))
    mentions.sort()
    # Each a bisect away, so a report of a megabyte naming files a hundred thousand times is
    # still read once: the "\n" of every line, and of every line ending a paragraph.
    newlines = [m.start() for m in re.finditer("\n", text)]
    ends = [
        at
        for k, at in enumerate(newlines)
        if text.startswith("#", at + 1)
        or not text[at + 1 : newlines[k + 1] if k + 1 < len(newlines) else len(text)].strip()
    ]
    labels = {n for n, (_, end, _) in enumerate(mentions) if _LABEL_AFTER.match(text, end)}
    leads = _leads(text, mentions, newlines, labels)
    pieces: dict[str, list[str]] = {}
    for n, (start, _, paths) in enumerate(mentions):
        line = bisect.bisect_left(newlines, start)
        line_start = newlines[line - 1] + 1 if line else 0
        before = mentions[n - 1][1] if n else 0
        stop = mentions[n + 1][0] if n + 1 < len(mentions) else len(text)
        if leads.get(line) == n:  # its line is its own, up to the next "NAME:" on it
            line_end = newlines[line] if line < len(newlines) else len(text)
            k = n + 1
            while k < len(mentions) and mentions[k][0] < line_end and k not in labels:
                k += 1
            stop = mentions[k][0] if k < len(mentions) else len(text)
        paragraph = bisect.bisect_left(ends, start)
        stop = min(stop, ends[paragraph] if paragraph < len(ends) else len(text))
        # A name inside a led line's words says nothing of its own file: it is named there.
        inside = line in leads and leads[line] < n and n not in labels
        said = "" if inside else blank[max(line_start, before) : stop]
        for path in paths:
            pieces.setdefault(path, []).append(said)
    return {path: " ".join(pieces[path]) if path in pieces else None for path in files}


# A name followed by a colon labels what follows ("README.md: ..."); one that starts its
# line so, after a list mark, leads the line ("- README.md: ...", "1. **README.md**: ...").
_LABEL_AFTER = re.compile(r"[`*]*[ \t]*:")
_LEAD_BEFORE = re.compile(r"[ \t]*(?:[-*+]|\d+[.)])?[ \t]*[`*]*")


def _leads(
    text: str,
    mentions: list[tuple[int, int, tuple[str, ...]]],
    newlines: list[int],
    labels: set[int],
) -> dict[int, int]:
    """The lines a name leads, as add_to_report writes them (`- PATH: WHAT IT HOLDS`): line
    number -> the mention leading it. What follows is said of that file, up to the next
    label on the line, names of other files in it included ("- src/summary.py: averages
    readings.csv's temperature_c" is all said of the script)."""
    leads: dict[int, int] = {}
    for n in sorted(labels):
        start = mentions[n][0]
        line = bisect.bisect_left(newlines, start)
        line_start = newlines[line - 1] + 1 if line else 0
        if line not in leads and _LEAD_BEFORE.fullmatch(text, line_start, start):
            leads[line] = n
    return leads


def check_report(status: str, root: Path, report: str, expected: list[str]) -> DemoOutcome:
    """Whether `report` (relative to `root`) exists and covers every file of `expected`."""
    path = root / report
    if not path.is_file():
        return DemoOutcome(status, report, present=False)
    text = _read(path)
    files = {name: _read(root / name) for name in expected if name != report}
    missing = survey_gaps(text, files)
    return DemoOutcome(
        status, report, present=True, missing=missing, named=len(files) - len(missing)
    )


def _read(path: Path) -> str:
    with path.open("rb") as f:
        return f.read(_MAX_REPORT_BYTES).decode("utf-8", errors="replace")
