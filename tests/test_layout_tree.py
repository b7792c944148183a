"""docs/layout.md's tree of the repository: every folder it lists and every file, folder and
module its descriptions name is there, and every top-level folder that holds Python code is
listed. (Its arrows are tests/test_layering.py's rules; the trajectory room's drawing is
checked in tests/test_trajectory_layout.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.doc_blocks import ROOT, doc_block

ENTRY = re.compile(r"^( {0,2})(\S+/) +(.*)$")
# Named in a description: a file, a folder (relative to the entry, or to the root), and a
# list of module names (`(model_call, tool_run, ...)`, `settings, resources and task_options`).
FILE = re.compile(r"\b[\w/]+\.py\b")
FOLDER = re.compile(r"(?<![\w.])[\w/]+/(?!\w)")
MODULES = re.compile(r"(?<![\w.])\w+(?:, \w+)+(?:,? and \w+)?(?![\w.])")


def entries() -> dict[Path, str]:
    """Each folder the tree lists, with its description (continuation lines joined)."""
    found: dict[Path, str] = {}
    top = ROOT
    last = ROOT
    for line in doc_block("docs/layout.md", "durable_agents/   the public names").text.splitlines():
        if entry := ENTRY.match(line):
            indent, name, words = entry.groups()
            last = (top if indent else ROOT) / name
            top = last if not indent else top
            found[last] = words
        else:
            found[last] += " " + line.strip()
    return found


def named(folder: Path, words: str) -> list[Path]:
    """The paths a description names, each in its folder or, failing that, the root's."""
    paths = [*FILE.findall(words), *FOLDER.findall(words)]
    for listed in MODULES.findall(words):
        modules = re.split(r",? and |, ", listed)
        if any("_" in m for m in modules):  # identifiers, not a list of words
            paths += [f"{m}.py" for m in modules]
    return [folder / p if (folder / p).exists() else ROOT / p for p in paths]


def test_every_folder_and_module_the_tree_names_exists() -> None:
    tree = entries()
    assert len(tree) > 10
    missing = [str(f.relative_to(ROOT)) for f in tree if not f.is_dir()]
    for folder, words in tree.items():
        missing += [str(p.relative_to(ROOT)) for p in named(folder, words) if not p.exists()]
    assert not missing, missing


def test_every_top_level_folder_with_code_is_listed() -> None:
    listed = {f for f in entries() if f.parent == ROOT}
    with_code = {
        d
        for d in ROOT.iterdir()
        if d.is_dir() and not d.name.startswith(".") and d.name != "build" and any(d.rglob("*.py"))
    }
    assert with_code - listed == set()
