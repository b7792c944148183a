"""Our modules and what each imports, read with ast (nothing is imported to find out)."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PUBLIC = "durable_agents"
# Each layer's folder, as installed under the one import name (durable_agents/ links to them).
PACKAGES = ("activities", "workers", "storage", "workflows")
LEAVES = ("vocabulary",)


def modules() -> dict[str, Path]:
    """Every module of ours by its installed name, `durable_agents.<layer>.<...>`."""
    found: dict[str, Path] = {PUBLIC: ROOT / PUBLIC / "__init__.py"}
    folders = [ROOT / pkg for pkg in PACKAGES] + [ROOT / PUBLIC / leaf for leaf in LEAVES]
    for folder in folders:
        for path in folder.rglob("*.py"):
            if "demo/workspace" in path.as_posix():
                continue
            rel = path.relative_to(folder.parent).with_suffix("").parts
            name = ".".join((PUBLIC, *rel)).removesuffix(".__init__")
            found[name] = path
    return found


def imports(path: Path) -> Iterator[tuple[str, str]]:
    """(module, name) for every `from module import name`; (module, "") for `import module`.
    Imports under `if TYPE_CHECKING:` and inside functions count too."""
    for node in ast.walk(ast.parse(path.read_text())):
        yield from _imported(node)


def load_time_imports(path: Path) -> Iterator[tuple[str, str]]:
    """As imports(), but only those that run when the module is imported: none inside a
    function or under `if TYPE_CHECKING:`."""
    for node in _run_at_import(ast.parse(path.read_text())):
        yield from _imported(node)


def _imported(node: ast.AST) -> Iterator[tuple[str, str]]:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        yield from ((node.module, a.name) for a in node.names)
    elif isinstance(node, ast.Import):
        yield from ((a.name, "") for a in node.names)


def _run_at_import(node: ast.AST) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.orelse:
                yield stmt
                yield from _run_at_import(stmt)
            continue
        yield child
        yield from _run_at_import(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def target_of(module: str, name: str, ours: Collection[str]) -> str | None:
    """The module of ours an import reaches: `from pkg import sub` reaches pkg.sub."""
    if not module.startswith(PUBLIC):
        return None
    full = f"{module}.{name}"
    if full in ours:
        return full
    while module not in ours:
        module = module.rpartition(".")[0]
    return module
