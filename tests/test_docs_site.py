"""The manual: a README a newcomer reads in five minutes, and docs/ as a site that builds in
strict mode (every page in the nav, every link and anchor resolved, docs/site/mkdocs.yml).
Every relative link in the README and the pages lands on a file (and a heading, where it
names one), and no page reads as a lab notebook: the history of runs lives in git."""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

from tests.support.doc_blocks import DOCS, FENCE, README, ROOT, doc_block, doc_pages
from tests.support.makefile import prerequisites, recipe

CONFIG = DOCS / "site" / "mkdocs.yml"
README_MAX_LINES = 300
# The README's sections, in the order a newcomer reads them.
README_SECTIONS = [
    "The two commands",
    "What `make run` shows",
    "Write your own agent",
    "Approvals from any client",
    "Where to go next",
]
# What a page says instead: the target, the current figure, the command and the machine.
LAB_NOTEBOOK = {
    r"\bissue \d+": "an issue number",
    r"\b20\d\d-\d\d-\d\d\b": "a date",
    r"\bre-?run": "a re-run",
    r"\bflak": "flakiness",
    r"\bcommits? [0-9a-f]{7,40}\b": "a commit as a run label",
    r"\bthis branch\b|\bon main\b": "a branch",
}
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def blank(match: re.Match[str]) -> str:
    """The match as blank lines, so line numbers stay those of the file."""
    return "\n" * match.group(0).count("\n")


def prose(text: str) -> str:
    """The text without code blocks and code spans: commands and identifiers may say anything."""
    return INLINE_CODE.sub("", FENCE.sub(blank, text))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it (and the site: pymdownx.slugs, case lower)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor on a page; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub(blank, page.read_text())):
        base = slug(heading)
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def test_the_site_builds_in_strict_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")  # mkdocs-material's notice on stdout
    site = tmp_path / "site"
    config = load_config(config_file=str(CONFIG), site_dir=str(site), strict=True)
    config.plugins.on_startup(command="build", dirty=False)
    try:
        with caplog.at_level(logging.WARNING, logger="mkdocs"):
            build(config)
    except Abort:
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        pytest.fail("mkdocs build --strict:\n" + "\n".join(warnings))
    finally:
        config.plugins.on_shutdown()
    # The README's example is included on the agents page, not copied there.
    assert "notes_server.py" in (site / "agents" / "index.html").read_text()


def test_the_readme_is_short_and_in_order() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert sections == README_SECTIONS


def test_the_readme_commands_are_the_makefile_s_and_ci_runs_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))
    named = set(re.findall(r"\bmake ([\w-]+)", README.read_text()))
    assert {"run", "test"} <= named
    assert named <= targets, named - targets
    # The two commands (`make run` runs the demo: tests/test_demo_command.py): `make test`
    # builds .venv, lints, type-checks and runs the suite, and is what CI runs.
    for block in (
        doc_block("README.md", "make run    # build .venv"),
        doc_block("docs/getting-started.md", "make run    # build .venv"),
    ):
        assert [ln.split("#", 1)[0].split() for ln in block.text.splitlines()] == [
            ["make", "run"],
            ["make", "test"],
        ]
    assert "$(STAMP)" in prerequisites("test")
    test = "\n".join(recipe("test"))
    for step in ("$(BIN)/ruff check .", "$(BIN)/mypy", "$(BIN)/pytest -q $(TEST_WORKERS)"):
        assert step in test, step
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec make test")


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(page: Path) -> None:
    broken = []
    for number, line in enumerate(prose(page.read_text()).splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            into = (page.parent / path).resolve() if path else page
            if not into.exists():
                broken.append(f"line {number}: {target} (no such file)")
            elif anchor and into.suffix == ".md" and anchor not in anchors(into):
                broken.append(f"line {number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_state_the_present(page: Path) -> None:
    found = [
        f"line {number}: {name}: {line.strip()[:120]}"
        for number, line in enumerate(prose(page.read_text()).splitlines(), 1)
        for pattern, name in LAB_NOTEBOOK.items()
        if re.search(pattern, line, flags=re.IGNORECASE)
    ]
    assert not found, "\n".join(found)
