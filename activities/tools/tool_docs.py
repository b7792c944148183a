"""A tool's description from its docstring: the first paragraph, and the `Args:` section.

Google style, the one most Python tools are written in::

    Find the weather.

    Longer notes the model does not need.

    Args:
        city: The city, e.g. "Lyon".
        days: How many days ahead (continuation lines
            are joined to the line above).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_SECTION = re.compile(r"^(Args|Arguments|Parameters):\s*$")
# "name: text" or "name (type): text"; the type is the signature's business, not the doc's.
_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class ToolDoc:
    """What a docstring says: the summary and a description per argument name."""

    summary: str = ""
    arguments: dict[str, str] = field(default_factory=dict)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _arguments(lines: list[str]) -> dict[str, str]:
    """The entries of an `Args:` section body (its lines up to the next unindented one)."""
    found: dict[str, list[str]] = {}
    entry_indent: int | None = None
    current: list[str] | None = None
    for line in lines:
        if not line.strip():
            continue
        indent = _indent(line)
        if entry_indent is None:
            entry_indent = indent
        match = _ENTRY.match(line.strip()) if indent <= entry_indent else None
        if match is not None:
            current = found.setdefault(match.group(1).lstrip("*"), [])
            if match.group(3):
                current.append(match.group(3).strip())
        elif current is not None and indent > entry_indent:
            current.append(line.strip())
    return {name: " ".join(words) for name, words in found.items() if words}


def parse_docstring(doc: str | None) -> ToolDoc:
    """The first paragraph (lines joined) and the `Args:` descriptions of a docstring."""
    if not doc:
        return ToolDoc()
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary.append(line.strip())
    arguments: dict[str, str] = {}
    for i, line in enumerate(lines):
        if _indent(line) == 0 and _SECTION.match(line):
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip() and not _indent(lines[j])),
                len(lines),
            )
            arguments = _arguments(lines[i + 1 : end])
            break
    return ToolDoc(" ".join(summary), arguments)
