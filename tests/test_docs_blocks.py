"""Every code block of the README and docs/ is taken by a test that runs it (or, for a sample
of output or of the tree, checks it against the real thing): no example goes stale unseen."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.support.doc_blocks import ROOT, DocBlock, doc_block, doc_blocks, doc_pages

TESTS = ROOT / "tests"
# The finder and this audit name doc_block without taking a block.
NOT_CLAIMS = {TESTS / "support" / "doc_blocks.py", Path(__file__).resolve()}


def claims() -> dict[tuple[str, str], list[str]]:
    """Each literal `doc_block(page, first)` call in the test modules, with where it is."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module in sorted(TESTS.rglob("*.py")):
        if module in NOT_CLAIMS:
            continue
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "doc_block"
            ):
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                assert len(args) == 2 and all(isinstance(a, str) for a in args), (
                    f"{module.relative_to(ROOT)}:{node.lineno}: doc_block takes two literal "
                    "strings, so this test can read what it takes"
                )
                found[(args[0], args[1])].append(f"{module.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_claim_names_one_block() -> None:
    wrong = []
    for (page, first), where in claims().items():
        try:
            doc_block(page, first)
        except (LookupError, FileNotFoundError) as exc:
            wrong.append(f"{', '.join(where)}: {exc}")
    assert not wrong, "\n".join(wrong)


def test_every_block_is_taken_by_a_test() -> None:
    taken: set[DocBlock] = {doc_block(page, first) for page, first in claims()}
    untaken = [
        f"{block.where()} [{block.lang or 'no language'}] {block.first[:80]}"
        for page in doc_pages()
        for block in doc_blocks(page)
        if block not in taken
    ]
    assert not untaken, "blocks no test runs or checks:\n" + "\n".join(untaken)
