"""The Makefile's targets as the docs name them: what each one runs."""

from __future__ import annotations

from tests.support.doc_blocks import ROOT

MAKEFILE = ROOT / "Makefile"


def prerequisites(target: str) -> list[str]:
    """What a target needs made first, as written after its colon."""
    line = MAKEFILE.read_text().split(f"\n{target}:", 1)[1].split("\n", 1)[0]
    return line.split()


def recipe(target: str) -> list[str]:
    """A target's commands as written there (tabs and line continuations kept as text)."""
    lines = MAKEFILE.read_text().split(f"\n{target}:", 1)[1].split("\n\n", 1)[0].splitlines()
    return [line.strip() for line in lines[1:]]
