"""Our modules and what each imports, read with ast (nothing is imported to find out)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
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
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield from ((node.module, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            yield from ((a.name, "") for a in node.names)
