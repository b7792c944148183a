"""Item kinds and session statuses are spelled once, as enums in the leaf vocabulary: the database's
check constraints hold exactly their values, and no module keeps its own list of them (three
different tuples of "terminal" statuses once disagreed)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sqlalchemy import text

from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES, SessionStatus
from durable_agents.workers.resources import Resources

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("activities", "storage", "workers", "workflows", "durable_agents/vocabulary")
# Where the words are defined: the enums, and migrations (frozen at the time they ran).
VOCABULARY = ROOT / "durable_agents" / "vocabulary"
OWNERS = {VOCABULARY / "item_kinds.py", VOCABULARY / "session_status.py"}


async def constraint_values(res: Resources, name: str) -> set[str]:
    async with res.sessions() as db:
        definition = await db.scalar(
            text("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = :n"),
            {"n": name},
        )
    assert definition is not None, f"no constraint {name}"
    return set(re.findall(r"'([a-z_]+)'", definition))


async def test_the_database_constraints_hold_exactly_the_enum_values(
    resources: Resources,
) -> None:
    assert await constraint_values(resources, "ck_sessions_status") == set(SessionStatus)
    assert await constraint_values(resources, "ck_items_kind") == set(ItemKind)


def test_terminal_statuses_are_the_ends_of_the_loop() -> None:
    # An archived session ended before it was archived; reading it gives that end back.
    assert set(TERMINAL_STATUSES) == {
        "completed",
        "failed",
        "cancelled",
        "no_answer",
        "check_failed",
        "stuck",
    }


def word_lists(path: Path, words: set[str]) -> list[str]:
    """Literal tuples, lists and sets of two or more of `words` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            named = [
                e.value
                for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in words
            ]
            if len(named) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {named}")
    return found


def test_no_module_keeps_its_own_list_of_statuses_or_kinds() -> None:
    words = set(SessionStatus) | set(ItemKind)
    found = [
        hit
        for pkg in PACKAGES
        for path in sorted((ROOT / pkg).rglob("*.py"))
        if path not in OWNERS and "migrations" not in path.parts
        for hit in word_lists(path, {str(w) for w in words})
    ]
    assert found == []
