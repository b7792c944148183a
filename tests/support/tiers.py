"""The suite's tiers, read from what each test uses: `services` (the real stack: Temporal,
PostgreSQL, S3), `temporal` (of those, it needs Temporal), `processes` (it starts a
subprocess: a worker, a gateway, llama-server, a CLI), `chaos` and `browser`. A test with
none of them (and not `real_model`) is the fast tier, `make test-fast`; in that run
`guard_fast_tier` makes starting any process fail loudly. `services` without `temporal` and
the rest is the storage tier, `make test-storage`: PostgreSQL and S3 alone.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import types
from collections.abc import Callable, Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any, NoReturn

import pytest

TIERS = ("services", "temporal", "processes", "chaos", "browser")
# The marker expression of the fast tier (the Makefile spells the same).
FAST = "not services and not processes and not chaos and not browser and not real_model"
FAST_ENV = "DURABLE_AGENTS_TEST_TIER"  # "fast" in `make test-fast`

# A fixture is a service (or a process) when its return annotation names one of these: it
# holds the running server. Everything built on it (stack, migrated, resources, client,
# agent_worker, cli_env, chaos_*) inherits the tier through the fixture closure. A test
# body (or a function of its module it calls) that names one of them starts it itself.
_SERVICE_TYPES = ("DevStack", "PostgresServer", "TemporalDevServer", "SeaweedServer", "PgInstall")
# Temporal's own: the session's server (the `temporal_server` fixture), or one a test starts.
_TEMPORAL_TYPES = ("TemporalDevServer", "DevStack", "WorkflowEnvironment")
_PROCESS_TYPES = ("LlamaServer", "WorkerProcess", "GatewayProcess", "GatewayDeviceProcess")
# Names whose call starts a subprocess, and modules whose helpers do. McpToolsets.start()
# probes, as the tool user, that it reaches the server.
_PROCESS_NAMES: tuple[str, ...] = (*_PROCESS_TYPES, "McpToolsets", "Popen")
_PROCESS_NAMES += ("create_subprocess_exec", "create_subprocess_shell")
_PROCESS_MODULES = (
    "subprocess",
    "tests.support.processes",
    "tests.support.dev_up",
    "tests.support.doc_runs",
    "tests.support.gateway_process",
    "tests.support.mcp",
    "tests.support.isolation_worker",
    "durable_agents.workers.process.prefork",
)
_BROWSER_MODULES = ("tests.support.browser", "playwright.async_api")
_ROOT = Path(__file__).resolve().parents[1]

Refers = Callable[[str, object], bool]


def _annotated(fixturedef: Any, names: tuple[str, ...]) -> bool:
    ret = getattr(fixturedef.func, "__annotations__", {}).get("return")
    text = ret if isinstance(ret, str) else getattr(ret, "__name__", repr(ret))
    return any(n in text for n in names)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _reaches(func: Any, module: types.ModuleType, refers: Refers, seen: set[int]) -> bool:
    """Whether `func`, or a function of its own module it calls, names something `refers`
    accepts: a static walk of the names its code uses (globals and attributes alike)."""
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    for c in _codes(code):
        for name in c.co_names:
            obj = module.__dict__.get(name)
            if refers(name, obj):
                return True
            if getattr(obj, "__module__", None) == module.__name__ and _reaches(
                obj, module, refers, seen
            ):
                return True
    return False


def _from(modules: tuple[str, ...], names: tuple[str, ...] = ()) -> Refers:
    def refers(name: str, obj: object) -> bool:
        if name in names:
            return True
        home = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "")
        return obj is not None and home in modules

    return refers


def _uses(item: pytest.Function, defs: list[Any], refers: Refers) -> bool:
    funcs = [(item.obj, item.module)] + [(d.func, inspect.getmodule(d.func)) for d in defs]
    return any(m is not None and _reaches(f, m, refers, set()) for f, m in funcs)


def tiers_of(item: pytest.Item) -> set[str]:
    """The tier markers the test's fixture closure (and its own calls) imply."""
    found: set[str] = set()
    path = Path(str(item.path)).resolve()
    if path.is_relative_to(_ROOT / "chaos"):
        found.add("chaos")
    if path.name.startswith("test_web_page"):
        found.add("browser")
    if not isinstance(item, pytest.Function):
        return found
    defs = [d for ds in item._fixtureinfo.name2fixturedefs.values() for d in ds]
    if any(_annotated(d, _SERVICE_TYPES) for d in defs) or _uses(
        item, defs, _from((), _SERVICE_TYPES)
    ):
        found.add("services")
    # The fixtures by what they return (the stack's own fixture names DevStack but starts
    # no Temporal), the test's own calls by what they name.
    if any(_annotated(d, _TEMPORAL_TYPES[:1]) for d in defs) or _uses(
        item, [], _from((), _TEMPORAL_TYPES)
    ):
        found.add("temporal")
    if any(_annotated(d, _PROCESS_TYPES) for d in defs) or _uses(
        item, defs, _from(_PROCESS_MODULES, _PROCESS_NAMES)
    ):
        found.add("processes")
    if _uses(item, defs, _from(_BROWSER_MODULES)):
        found.add("browser")
    return found


def mark_tiers(items: list[pytest.Item]) -> None:
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for tier in tiers_of(item) - have:
            item.add_marker(getattr(pytest.mark, tier))


# How long a file of each tier tends to take: on several xdist workers the files go out in
# this order (heaviest first), so the run ends on short files, not on one worker's chaos
# or process test while the others are idle.
_WEIGHTS = {"chaos": 4, "browser": 3, "processes": 3, "temporal": 2, "services": 1}
# Files that start processes (interpreters, stacks, a browser) spend CPU; in-process Temporal
# files mostly wait on timers and servers. Handed out in turns, so that the workers at any
# moment run some of each and neither the cores nor the workers sit idle.
_TAKE_TURNS = (3, 2)


def heaviest_files_first(items: list[pytest.Item]) -> None:
    """Order the files by their heaviest tier, in place, the process and Temporal tiers'
    files taking turns: a file's tests stay together and in their order, and files of one
    weight keep their collection order."""
    weight: dict[Path, int] = {}
    first: dict[Path, int] = {}
    for index, item in enumerate(items):
        heaviest = max((_WEIGHTS.get(m.name, 0) for m in item.iter_markers()), default=0)
        weight[item.path] = max(weight.get(item.path, 0), heaviest)
        first.setdefault(item.path, index)
    files = sorted(first, key=lambda path: (-weight[path], first[path]))
    turns = {w: [f for f in files if weight[f] == w] for w in _TAKE_TURNS}
    alternating = [f for pair in zip_longest(*turns.values()) for f in pair if f is not None]
    lead = [f for f in files if weight[f] > max(_TAKE_TURNS)]
    rest = [f for f in files if weight[f] < min(_TAKE_TURNS)]
    rank = {path: n for n, path in enumerate(lead + alternating + rest)}
    items.sort(key=lambda item: rank[item.path])


def _refuse(*args: object, **kwargs: object) -> NoReturn:
    raise RuntimeError(
        "the fast tier (make test-fast) started a process: this test needs the services or "
        "processes tier; tests/support/tiers.py decides the markers"
    )


def guard_fast_tier() -> None:
    """In `make test-fast`, starting a server, a worker or any other process fails (from the
    end of collection on: imports may still probe the system)."""
    if os.environ.get(FAST_ENV) == "fast":
        subprocess.Popen.__init__ = _refuse  # type: ignore[method-assign]
