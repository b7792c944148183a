"""Where a repository of storage (a class bound to a database session) is built, read with
ast: what tests/test_layering.py holds to storage/ alone."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.imports import PUBLIC, ROOT


def _binds_a_session(node: ast.ClassDef) -> bool:
    """The class takes an AsyncSession first: an `__init__(self, db: AsyncSession, ...)`,
    or a dataclass whose first field is one (AgentState)."""
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            args = stmt.args.args[1:]
            return bool(args) and ast.unparse(args[0].annotation or ast.Constant("")) == (
                "AsyncSession"
            )
    fields = [s for s in node.body if isinstance(s, ast.AnnAssign)]
    return bool(fields) and ast.unparse(fields[0].annotation) == "AsyncSession"


def session_bound_classes() -> set[str]:
    """The classes of storage/ built on a database session."""
    return {
        node.name
        for path in (ROOT / "storage").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and _binds_a_session(node)
    }


def builds(tree: ast.AST, classes: set[str]) -> Iterator[tuple[int, str]]:
    """(line, class) of every call that builds one of `classes`: by its name, under an
    alias it was imported as, or as an attribute (`items.ItemRepository(...)`)."""
    names = {c: c for c in classes}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PUBLIC):
            names.update({a.asname: a.name for a in node.names if a.asname and a.name in classes})
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in names:
            yield node.lineno, names[func.id]
        elif isinstance(func, ast.Attribute) and func.attr in classes:
            yield node.lineno, func.attr


def builds_in(path: Path, classes: set[str]) -> Iterator[tuple[int, str]]:
    yield from builds(ast.parse(path.read_text()), classes)
