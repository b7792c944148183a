"""The docs' commands that `make test` cannot run in full, checked as far as they run here:
each command line is parsed by the real parser of what it runs (agentctl's command tree,
pip's, a bench script's argparse), each path, Makefile target, extra and variable it names
exists and is read, and what can run cheaply does. Parsed only, and why:

- docs/BENCHMARKS.md's install: a fresh install downloads the extras (minutes);
- docs/DEPLOY.md's venv size: a new virtualenv and a full install (minutes, the network);
  `du -sm` runs on a directory of this test;
- docs/RELIABILITY.md's `pytest tests/chaos`: `make test` runs that folder itself;
- docs/SCALE.md's benches: minutes each on a stack of their own;
- docs/real-models.md: llama.cpp and its model come with `make local-model` (a 12-minute
  build), the hosted providers are not reachable from here, and `agentctl dev up` starts a
  stack (the suite's own stands in for it elsewhere).

The runnable commands of DEPLOY.md run elsewhere: `agentctl migrate` in
tests/test_migrate_check.py, `agentctl deploy check` in tests/test_deploy_check.py, and the
`temporal worker deployment` commands in tests/test_worker_versioning.py."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from pip._internal.commands import create_command
from pydantic import ValidationError

from durable_agents.workers.settings import ModelSettings
from durable_agents.workers.stack.llama import LlamaServer
from durable_agents.workers.stack.local_model import DEFAULT_MODEL, model_named
from tests.support.deploy_env import agentctl_error, settings_env
from tests.support.doc_blocks import ROOT, doc_block
from tests.support.makefile import recipe
from tests.test_demo_command import DEMO

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
ASSIGNMENT = re.compile(r"^([A-Z_]+)=(.*)$")


def command_lines(text: str) -> list[str]:
    """A block's commands, a line continued with a backslash joined to the next."""
    return [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def env_and_argv(line: str) -> tuple[dict[str, str], list[str]]:
    """`NAME=VALUE ... command args` as a shell reads it (comments and a trailing & off)."""
    words = shlex.split(line, comments=True)
    env = {}
    while words and (found := ASSIGNMENT.match(words[0])):
        env[found.group(1)] = found.group(2)
        words.pop(0)
    return env, [w for w in words if w != "&"]


def agentctl(argv: list[str]) -> list[str]:
    """`.venv/bin/agentctl ...` as agentctl_error takes it."""
    assert argv[0] in ("agentctl", ".venv/bin/agentctl"), argv
    return ["agentctl", *argv[1:]]


def pip_install(args: list[str]) -> argparse.Namespace:
    """pip's own parser on `pip install ARGS` (optparse: an unknown option exits 2)."""
    options, targets = create_command("install").parse_args(args)
    return argparse.Namespace(**vars(options), targets=targets)


def extra_packages(name: str) -> set[str]:
    return {Requirement(r).name for r in EXTRAS[name]}


def test_the_benchmarks_install_names_the_bench_extra_s_packages() -> None:
    block = doc_block("docs/BENCHMARKS.md", "pip install -e '.[bench,devstack]'")
    install, cd = block.text.splitlines()
    argv = shlex.split(install, comments=True)
    assert argv[:2] == ["pip", "install"]
    assert pip_install(argv[2:]).editables == [".[bench,devstack]"]
    packages, stack = install.split("# ", 1)[1].split("; ")
    assert set(packages.split(", ")) == extra_packages("bench")
    assert stack == "the stack" and "devstack" in EXTRAS
    assert shlex.split(cd, comments=True) == ["cd", "bench"] and (ROOT / "bench").is_dir()


def test_the_image_size_commands_parse_and_du_runs(tmp_path: Path) -> None:
    block = doc_block("docs/DEPLOY.md", "python3.11 -m venv /tmp/sz && /tmp/sz/bin/pip install .")
    build, measure = block.text.splitlines()
    venv, install = (shlex.split(part) for part in build.split("#", 1)[0].split("&&"))
    assert venv == ["python3.11", "-m", "venv", "/tmp/sz"]
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    assert install[:2] == ["/tmp/sz/bin/pip", "install"]
    alternative = shlex.split(build.split("# or ", 1)[1])  # `.[devstack]` for the stack too
    for targets in (install[2:], alternative):
        assert pip_install(targets).targets == targets
    assert alternative == [".[devstack]"] and "devstack" in EXTRAS
    du = [str(tmp_path) if w == "/tmp/sz" else w for w in shlex.split(measure, comments=True)]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "x").write_bytes(b"x" * 3_000_000)
    out = subprocess.run(du, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["3", str(tmp_path)]  # MiB, rounded up


def test_the_chaos_command_runs_a_folder_make_test_runs() -> None:
    block = doc_block("docs/RELIABILITY.md", ".venv/bin/pytest -q tests/chaos")
    (argv,) = (shlex.split(line) for line in block.text.splitlines())
    assert argv[0] == ".venv/bin/pytest" and argv[-1] == "tests/chaos"
    assert [p.name for p in (ROOT / argv[-1]).glob("test_*.py")]
    pytest_options = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert pytest_options["testpaths"] == ["tests"]
    # make test selects by marker only what the real-model tier is, not chaos.
    assert (
        pytest_options["addopts"].count("-m ") == 1
        and "-m 'not real_model'" in (pytest_options["addopts"])
    )
    assert "$(BIN)/pytest -q $(TEST_WORKERS); tests=$$?; \\" in recipe("test")
    workers = re.search(r"^TEST_WORKERS \?= (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert workers and " -m " not in workers.group(1) and "--ignore" not in workers.group(1)


def bench_arguments(script: Path) -> argparse.ArgumentParser:
    """A bench script's own argument parser (bench/ on sys.path, as when it runs)."""
    sys.path.insert(0, str(script.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(script.parent))
    parser: argparse.ArgumentParser = module.arguments()
    return parser


def test_the_scale_benches_take_the_arguments_the_page_gives() -> None:
    block = doc_block("docs/SCALE.md", "cd bench && ../.venv/bin/python scale_costs.py")
    parsed = []
    for line in command_lines(block.text):
        cwd, command = ROOT, line.split("#", 1)[0]
        if command.startswith("cd "):
            into, command = command.split("&&", 1)
            cwd = ROOT / shlex.split(into)[1]
        python, script, *args = shlex.split(command)
        assert (cwd / python).resolve() == (ROOT / ".venv" / "bin" / "python").resolve()
        try:
            parsed.append(bench_arguments(cwd / script).parse_args(args))
        except SystemExit:
            pytest.fail(f"{script} refuses {args}")
    assert len(parsed) == 3
    assert parsed[1].sizes == "2000,20000,100000" and parsed[1].json == "/tmp/scale.json"
    assert (parsed[2].sessions, parsed[2].workers) == (300, 2)


def test_the_real_model_targets_run_the_demo_and_the_tier() -> None:
    block = doc_block("docs/real-models.md", "make demo-local        # the demo task on")
    targets = [shlex.split(line, comments=True) for line in block.text.splitlines()]
    assert targets == [["make", "demo-local"], ["make", "test-real-model"]]
    (demo,) = recipe("demo-local")
    assert demo.startswith("$(BIN)/agentctl demo --model local")
    assert agentctl_error(agentctl(demo.removeprefix("$(BIN)/").split())) is None
    assert recipe("test-real-model") == [
        "$(BIN)/pytest -q -m real_model -o timeout=1800 tests/real_model"
    ]
    # "4 tasks end to end (one checks usage) + a 3-minute outage", each marked for the tier.
    tests = []
    for module in (ROOT / "tests" / "real_model").glob("test_*.py"):
        text = module.read_text()
        assert "pytestmark = pytest.mark.real_model" in text, module.name
        tests += [
            n.name
            for n in ast.parse(text).body
            if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef) and n.name.startswith("test_")
        ]
    outages = [t for t in tests if "outage" in t]
    assert len(outages) == 1 and "three_minute" in outages[0]
    tasks = [t for t in tests if t not in outages]
    assert len(tasks) == 4 and len([t for t in tasks if "usage" in t]) == 1


def model_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> ModelSettings:
    """The settings a worker reads from `env` (every name one the settings read)."""
    assert set(env) <= settings_env(), set(env) - settings_env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        return ModelSettings()
    except ValidationError as err:
        pytest.fail(f"{env}: {err}")


def test_the_local_model_s_settings_are_what_serve_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = doc_block("docs/real-models.md", ".venv/bin/agentctl local-model serve --port 8080 &")
    serve, dev_up = (env_and_argv(line) for line in command_lines(block.text))
    assert serve[0] == {} and agentctl_error(agentctl(serve[1])) is None
    port = int(serve[1][serve[1].index("--port") + 1])
    server = LlamaServer(model_named(DEFAULT_MODEL), tmp_path, port=port)
    env, argv = dev_up
    assert env == {
        "MODEL_PROVIDER": "openai",
        "MODEL_BASE_URL": server.base_url,
        "MODEL_NAME": server.served_name,
    }
    assert agentctl(argv) == ["agentctl", "dev", "up"] and agentctl_error(agentctl(argv)) is None
    assert model_settings(env, monkeypatch).base_url == server.base_url


def test_the_hosted_model_lines_are_settings_and_commands_agentctl_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = doc_block("docs/real-models.md", "MODEL_PROVIDER=openai MODEL_API_KEY=sk-... ")
    providers = []
    for line in command_lines(block.text):
        env, argv = env_and_argv(line)
        assert agentctl_error(agentctl(argv)) is None, line
        with monkeypatch.context() as scoped:
            settings = model_settings(env, scoped)
        assert settings.name == env["MODEL_NAME"]
        providers.append(settings.provider)
    assert providers == ["openai", "anthropic", "openai"]


def test_make_run_is_the_demo_the_demo_test_runs() -> None:
    """The README's and getting-started's two commands: `make run` runs `agentctl demo`, which
    tests/test_demo_command.py runs end to end; `make test` is this suite
    (tests/test_docs_site.py checks its recipe and CI's command)."""
    for block in (
        doc_block("README.md", "make run    # build .venv"),
        doc_block("docs/getting-started.md", "make run    # build .venv"),
    ):
        commands = [ln.split("#", 1)[0].split() for ln in block.text.splitlines()]
        assert commands == [["make", "run"], ["make", "test"]], block.where()
    assert recipe("run") == [" ".join(["$(BIN)/agentctl", *DEMO])]
