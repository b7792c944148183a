"""A helper that reads the wall clock, imported by tests/support/sandbox_probe.py as a
workflow helper module in workflows/ would be: whether the sandbox catches the read depends
only on whether this module is shared with the host."""

from __future__ import annotations

from datetime import datetime


def read_clock() -> str:
    return datetime.now().isoformat()
