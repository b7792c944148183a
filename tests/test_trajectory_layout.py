"""The trajectory is one package with one-way imports: no import circle among our modules,
one module that knows the GenAI (`gen_ai.*`) names, no SQL outside storage repositories,
and a forwarder that uses the package's public names only. docs/layout.md draws the
package's imports; the drawing is checked against them."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from tests.support.doc_blocks import doc_block
from tests.support.imports import PUBLIC, ROOT, imports, modules

GENAI = "activities/trajectory/genai.py"
SQL_BUILDERS = {"select", "insert", "update", "delete", "text"}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for module, imported in imports(path):
            # `from pkg import sub` names the submodule; its package's __init__ is not a use.
            target = f"{module}.{imported}" if f"{module}.{imported}" in mods else module
            if target in mods and target != name:
                deps.add(target)
        graph[name] = deps
    return graph


def cycle_from(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return [*path[path.index(w) :], w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_our_modules_import_one_way_only() -> None:
    assert cycle_from(import_graph()) is None


def test_only_the_genai_module_knows_gen_ai_names() -> None:
    knowing = {
        str(path.relative_to(ROOT)) for path in modules().values() if "gen_ai." in path.read_text()
    }
    assert knowing == {GENAI}


def test_the_trajectory_writes_no_sql_of_its_own() -> None:
    places = [*(ROOT / "activities" / "trajectory").glob("*.py")]
    places.append(ROOT / "workers" / "process" / "trajectory_forwarder.py")
    for path in places:
        built = {n for m, n in imports(path) if m.startswith("sqlalchemy") and n in SQL_BUILDERS}
        assert not built, f"{path.name} builds SQL ({built}): that belongs in a repository"


def test_the_forwarder_uses_the_trajectory_packages_public_names_only() -> None:
    forwarder = ROOT / "workers" / "process" / "trajectory_forwarder.py"
    ours = {m for m, _ in imports(forwarder) if m.startswith("durable_agents.activities")}
    assert ours == {"durable_agents.activities.trajectory"}


def sdk_private_overrides(module: ModuleType) -> list[str]:
    """`Class._name` defined in `module` over a private name of a temporalio/opentelemetry base."""
    found = []
    for cls in vars(module).values():
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        sdk = [
            b for b in cls.__mro__[1:] if b.__module__.startswith(("temporalio", "opentelemetry"))
        ]
        for name in vars(cls):
            # (_abc_impl is the ABC machinery every abstract subclass gets)
            private = name.startswith("_") and not name.startswith(("__", "_abc_"))
            if private and any(hasattr(b, name) for b in sdk):
                found.append(f"{cls.__name__}.{name}")
    return found


def test_no_sdk_private_method_is_overridden() -> None:
    for path in (ROOT / "activities" / "trajectory").glob("*.py"):
        module = importlib.import_module(
            f"durable_agents.activities.trajectory.{path.stem}".removesuffix(".__init__")
        )
        assert sdk_private_overrides(module) == [], path.name


ROOM = "durable_agents.activities.trajectory"
ARROW = re.compile(r"^  (\w+)\s+(?:──▶\s+(.*?))?\s*(?:\((.*)\))?$")


def drawn(name: str) -> str:
    """The module a name on the page's diagram stands for (a path's tail is enough)."""
    dotted = name.strip().strip("/").replace("/", ".")
    found = [m for m in modules() if m == f"{PUBLIC}.{dotted}" or m.endswith(f".{dotted}")]
    assert len(found) == 1, f"{name!r} names {found or 'no module'}"
    return found[0]


def names(text: str) -> list[str]:
    return [n.strip() for n in re.split(r",|\s{2,}", re.sub(r"\(.*?\)", "", text)) if n.strip()]


def test_the_layout_page_draws_the_room_s_imports_as_they_are() -> None:
    """docs/layout.md's diagram: its callers import the room, each module of the room imports
    exactly the room's modules its arrow names, all below it, and what the room imports of
    storage is the bottom row."""
    lines = doc_block("docs/layout.md", "activities/model_call, tool_run").text.splitlines()
    graph = import_graph()
    callers: list[str] = []
    for group in re.split(r"\s{2,}", lines[0].strip()):
        first, *rest = group.split(", ")
        callers += [first, *(first.rsplit("/", 1)[0] + "/" + name for name in rest)]
    for caller in callers:
        assert ROOM in graph[drawn(caller)], f"{caller} does not import the room"

    rows = [m for line in lines if (m := ARROW.match(line))]
    order = [f"{ROOM}.{row.group(1)}" for row in rows]
    assert set(order) == {m for m in modules() if m.startswith(f"{ROOM}.")}
    for at, row in enumerate(rows):
        module, targets = order[at], [drawn(n) for n in names(row.group(2) or "")]
        inside = {t for t in targets if t.startswith(f"{ROOM}.")}
        assert graph[module] & set(order) == inside, module
        assert set(targets) <= graph[module], module
        assert all(order.index(t) > at for t in inside), f"{module} imports one above it"
        if (note := row.group(3) or "").startswith("and the SDK's "):
            sdk = "temporalio." + note.removeprefix("and the SDK's ")
            assert any(m.startswith(sdk) for m, _ in imports(modules()[module])), module

    storage = {t for m in order for t in graph[m] if t.startswith(f"{PUBLIC}.storage.")}
    bottom = lines[-1].removeprefix("storage/")
    assert storage == {drawn(f"storage/{n.split()[0]}") for n in names(bottom)}
