"""A page's sample of a command's output, checked against a real run of the command: each
line of the sample is a line of the output, in the same order, once what differs run to run
(ids, hashes, ports, counts, durations) is set aside. A line that holds nothing but `…`
(inside a box or not) marks where the sample leaves lines out."""

from __future__ import annotations

import re

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
# A hex run with a digit in it: a sha256 or its prefix, a short id (log-reader-9084ec5f).
HEX = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
BOX = "│┃║╭╮╰╯┏┓┗┛└┘┌┐─━ "


def normalised(line: str) -> str:
    """The line with ids, hashes and numbers as placeholders and runs of spaces as one."""
    line = HEX.sub("<hex>", UUID.sub("<uuid>", line))
    return " ".join(NUMBER.sub("<n>", line).split())


def is_trim_mark(line: str) -> bool:
    return line.strip(BOX) == "…"


def unmatched(sample: str, output: list[str], apart: tuple[str, ...] = ()) -> list[str]:
    """The sample's lines (blank lines and trim marks aside) that are not, in order, lines of
    `output`: empty when the sample is what the command printed. Lines that start with one
    of `apart` come from a writer of their own, running beside the rest: they are matched
    in their own order, and the rest in theirs."""
    lines = [ln for ln in sample.splitlines() if ln.strip() and not is_trim_mark(ln)]
    missing = []
    for own in (True, False):  # (with nothing apart, every line is the rest's)
        mine = [ln for ln in lines if ln.startswith(apart) == own]
        real = [normalised(ln) for ln in output if ln.startswith(apart) == own]
        at = 0
        for line in mine:
            try:
                at = real.index(normalised(line), at) + 1
            except ValueError:
                missing.append(line)
    return missing
