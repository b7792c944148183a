"""The fast tier (`make test-fast`) holds no test that needs a service, starts a process or
drives a browser: the markers tests/support/tiers.py sets, read back from a real collection
of the whole suite in a child pytest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.tiers import FAST, FAST_ENV, TIERS, heaviest_files_first

REPO = Path(__file__).resolve().parents[1]

# Prints each collected test with its markers and fixture closure, as JSON lines.
_COLLECT = """
import json, sys
import pytest

class Report:
    def pytest_collection_finish(self, session):
        for item in session.items:
            print("ITEM " + json.dumps({
                "id": item.nodeid,
                "marks": sorted({m.name for m in item.iter_markers()}),
                "fixtures": sorted(getattr(item, "fixturenames", ())),
            }))

sys.exit(pytest.main(
    ["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "", "tests"], plugins=[Report()]
))
"""

# Fixtures that start (or hold) the real stack or llama-server: none may be in the fast tier.
SERVICE_FIXTURES = {"devstack", "stack", "migrated", "resources", "client", "agent_worker"}
SERVICE_FIXTURES |= {"cli_env", "chaos_devstack", "chaos_client", "chaos_worker", "llama"}


@pytest.fixture(scope="module")
def collected() -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != FAST_ENV},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("ITEM ")]
    return {row["id"]: row for row in rows}


def _fast(row: dict[str, Any]) -> bool:
    return not set(row["marks"]) & {*TIERS, "real_model"}


def test_the_fast_tier_holds_no_service_fixture_and_is_most_of_the_suite(
    collected: dict[str, dict[str, Any]],
) -> None:
    fast = {i: r for i, r in collected.items() if _fast(r)}
    assert len(collected) > 1000 and len(fast) > 400, (len(collected), len(fast))
    leaks = {i: sorted(set(r["fixtures"]) & SERVICE_FIXTURES) for i, r in fast.items()}
    assert not {i: f for i, f in leaks.items() if f}


def test_markers_follow_fixtures_paths_and_the_calls_a_test_makes(
    collected: dict[str, dict[str, Any]],
) -> None:
    def marks(prefix: str) -> list[set[str]]:
        found = [set(r["marks"]) for i, r in collected.items() if i.startswith(prefix)]
        assert found, prefix
        return found

    # A pure unit test file: every test in the fast tier.
    assert all(_fast(r) for i, r in collected.items() if i.startswith("tests/test_tools_files.py"))
    # Anything on the stack's fixtures needs services (client, the worker, the database).
    for row in collected.values():
        if {"client", "agent_worker", "resources", "migrated"} & set(row["fixtures"]):
            assert "services" in row["marks"], row["id"]
    assert all("chaos" in m for m in marks("tests/chaos/"))
    assert all("browser" in m for m in marks("tests/test_web_page"))
    assert all("real_model" in m for m in marks("tests/real_model/"))
    # Started in the test body, not by a fixture: `agentctl demo`, a DevStack of its own.
    assert all("processes" in m for m in marks("tests/test_demo_command.py"))
    assert all("services" in m for m in marks("tests/test_devstack.py::test_stack_stops"))


def test_the_storage_tier_starts_no_temporal(collected: dict[str, dict[str, Any]]) -> None:
    storage = {
        i: r
        for i, r in collected.items()
        if "services" in r["marks"]
        and not set(r["marks"]) & {"temporal", "processes", "chaos", "browser", "real_model"}
    }
    assert len(storage) > 200, len(storage)
    # Whatever reaches Temporal goes through the temporal_server fixture (stack, migrated,
    # client, agent_worker, cli_env): none of it is in a storage-tier test's closure.
    temporal = {"temporal_server", "stack", "migrated", "client", "agent_worker", "cli_env"}
    leaks = {i: sorted(set(r["fixtures"]) & temporal) for i, r in storage.items()}
    assert not {i: f for i, f in leaks.items() if f}
    assert all("temporal" in r["marks"] for r in collected.values() if "client" in r["fixtures"])
    assert any(i.startswith("tests/test_repositories.py") for i in storage)


def test_make_test_storage_selects_the_storage_tier() -> None:
    makefile = (REPO / "Makefile").read_text()
    target = makefile.split("\ntest-storage:", 1)[1].split("\n\n", 1)[0]
    assert "services and not temporal and not processes" in re.sub(r"\\\n\s*", "", target)


def test_make_test_fast_selects_the_fast_tier() -> None:
    makefile = (REPO / "Makefile").read_text()
    target = makefile.split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]
    assert f'-m "{FAST}"' in re.sub(r"\\\n\s*", "", target)
    assert f"{FAST_ENV}=fast" in target


def test_in_the_fast_tier_starting_a_process_fails_loudly() -> None:
    probe = (
        "import subprocess\n"
        "from tests.support.tiers import guard_fast_tier\n"
        "guard_fast_tier()\n"
        "subprocess.run(['true'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, FAST_ENV: "fast"},
    )
    assert done.returncode != 0
    assert "the fast tier (make test-fast) started a process" in done.stderr


class _Item:
    """What heaviest_files_first reads of a collected test: its file and its markers."""

    def __init__(self, path: str, *tiers: str) -> None:
        self.path = Path(path)
        self.marks = [getattr(pytest.mark, tier).mark for tier in tiers]

    def iter_markers(self) -> list[pytest.Mark]:
        return self.marks


def test_xdist_hands_out_the_heaviest_files_first_each_file_whole() -> None:
    items = [
        _Item("test_a.py"),
        _Item("test_b.py", "services"),
        _Item("test_b.py", "services", "temporal", "processes"),
        _Item("test_b.py"),
        _Item("test_c.py", "services", "temporal"),
        _Item("chaos/test_d.py", "chaos", "services"),
        _Item("test_e.py", "browser"),
        _Item("test_f.py", "services"),
        _Item("test_g.py", "services", "temporal"),
        _Item("test_h.py", "processes"),
    ]
    order = list(items)
    heaviest_files_first(order)  # type: ignore[arg-type]
    # A file weighs what its heaviest test does; its tests keep their order, together; the
    # files that start processes and the in-process Temporal ones take turns.
    b, c, d, e, f, g, h = (items[1:4], items[4], items[5], items[6], items[7], items[8], items[9])
    assert order == [d, *b, c, e, g, h, f, items[0]]


_HANGS = """
import asyncio

async def test_before():
    pass

async def test_hangs_forever():
    await asyncio.Event().wait()

async def test_after():
    pass
"""


def test_a_hanging_test_fails_by_name_and_the_run_goes_on(tmp_path: Path) -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]
    ini = options["ini_options"]
    assert 0 < ini["timeout"] <= 600, "every test of `make test` has a bound"
    (tmp_path / "test_hang.py").write_text(_HANGS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    # The suite's way of running (xdist workers, the configured method), a 2 s bound.
    bound = ["-o", f"timeout_method={ini['timeout_method']}", "-o", "timeout=2", "test_hang.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", *bound],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAILED test_hang.py::test_hangs_forever" in done.stdout
    assert "1 failed, 2 passed" in done.stdout
