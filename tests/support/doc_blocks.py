"""The fenced code blocks of the README and docs/, each taken by the test that runs it.

A test takes a block with `doc_block(page, first)`: the one block on `page` whose first line
starts with `first`. tests/test_docs_blocks.py reads every test module for those calls and
fails on a block that no test takes, so an example cannot be added or changed unrun."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(```|~~~)([^\n]*)\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class DocBlock:
    page: str  # relative to the repository: README.md, docs/cli.md
    line: int  # of the opening fence
    lang: str  # the fence's info string: sh, python, text, or empty
    text: str

    @property
    def first(self) -> str:
        return self.text.split("\n", 1)[0]

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list[Path]:
    """The README and every page under docs/ (the site's config folder holds none)."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def doc_blocks(page: str | Path) -> list[DocBlock]:
    path = page if isinstance(page, Path) else ROOT / page
    name = str(path.relative_to(ROOT))
    text = path.read_text()
    return [
        DocBlock(name, text.count("\n", 0, m.start()) + 1, m.group(2).strip(), m.group(3))
        for m in FENCE.finditer(text)
    ]


def doc_block(page: str, first: str) -> DocBlock:
    """The one block on `page` whose first line starts with `first`."""
    found = [b for b in doc_blocks(page) if b.first.startswith(first)]
    if len(found) != 1:
        firsts = "\n".join(f"  {b.where()}: {b.first[:80]}" for b in doc_blocks(page))
        raise LookupError(
            f"{len(found)} blocks on {page} start with {first!r}; its blocks:\n{firsts}"
        )
    return found[0]
