"""`pip install` of this repository installs one import name, `durable_agents`: the layers'
folders (workflows/, activities/, storage/, workers/) are installed under it, with their
package data, and nothing else lands at the top of site-packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from durable_agents import __all__ as public_names

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("workflows", "activities", "storage", "workers")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of what the build reads, so no build/ or egg-info lands in the clone.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in (*LAYERS, "durable_agents"):
        shutil.copytree(REPO / folder, source / folder, symlinks=True, ignore=skip)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("durable_agents-*.whl")
    return built


def test_the_wheel_holds_one_top_level_name_and_every_module(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"durable_agents"}
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).split() == [b"durable_agents"]
    ours = {
        f"durable_agents/{p.relative_to(REPO).as_posix()}"
        for layer in LAYERS
        for p in (REPO / layer).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert ours - set(names) == set()
    for data in ("storage/roles.sql", "workers/gateway/web/index.html", "workers/demo/workspace"):
        assert any(n.startswith(f"durable_agents/{data}") for n in names), data
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert b"agentctl = durable_agents.workers.cli.main:run" in zipfile.ZipFile(wheel).read(
        entry_points
    )


def test_the_installed_package_serves_the_public_names_and_no_layer_at_the_top(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # (bin/ holds the agentctl script)
    installed = {p.name for p in target.iterdir() if not p.name.endswith(".dist-info")}
    assert installed == {"durable_agents", "bin"}
    probe = (
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "import durable_agents\n"
        f"assert durable_agents.__file__.startswith({str(target)!r}), durable_agents.__file__\n"
        "before = set(sys.modules)\n"
        "import durable_agents as da\n"
        "names = [getattr(da, n) for n in da.__all__]\n"
        "from durable_agents.workers.stack.postgres import ROLES_SQL\n"
        "assert ROLES_SQL.is_file(), ROLES_SQL\n"
        "for layer in ('workflows', 'activities', 'storage', 'workers'):\n"
        "    assert importlib.util.find_spec(layer) is None, layer\n"
        "print(len(names))\n"
    )
    # From outside the repository, so its folders are not on sys.path.
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == str(len(public_names))


def test_importing_the_public_package_loads_no_layer() -> None:
    # The workflow sandbox imports `durable_agents` before `durable_agents.workflows`: the
    # public names are imported on first use only.
    probe = (
        "import sys, durable_agents\n"
        "print(sorted(m for m in sys.modules if m.startswith('durable_agents')))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert ran.stdout.strip() == "['durable_agents']", ran.stderr[-2000:]


@pytest.mark.parametrize(
    "spelling",
    [
        "import storage",
        "import storage.errors",
        "from workflows.agent import AgentWorkflow",
        "import activities",
        "from workers import api",
    ],
)
def test_a_layer_imported_by_its_folders_name_fails_naming_the_one_spelling(spelling: str) -> None:
    # From the repository root, with it on sys.path, the folders are importable by their own
    # names: a module loaded so would be a second copy beside durable_agents.<layer>'s, whose
    # exceptions the first copy's `except` does not catch.
    layer = spelling.split()[1].partition(".")[0]
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "try:\n"
        f"    {spelling}\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
        f"import durable_agents.{layer}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{LAYERS!r}))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.splitlines() == [
        f"ImportError {layer!r} is not an import name of durable-agents: import "
        f"durable_agents.{layer} (and its modules as durable_agents.{layer}.<module>)",
        "[]",
    ]


def test_the_public_names_are_the_python_apis_and_each_resolves() -> None:
    import durable_agents
    from durable_agents.workers import api

    assert set(api.__all__) <= set(public_names)
    for name in public_names:
        assert getattr(durable_agents, name) is not None, name
    assert durable_agents.workflows.contracts.AgentInput is durable_agents.AgentInput
