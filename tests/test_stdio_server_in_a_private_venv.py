"""A stdio MCP server whose command is a virtualenv's python, in a clone inside a 0700
directory (root's home, a `mktemp -d`), on a root worker: the tool user it runs as cannot
reach the venv, so the worker refuses it at once, in one line that names the directory in
the way and what to do, instead of spawning a server that dies (or another python that
runs without the venv's packages)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable_agents.activities.tools.mcp_servers import McpStdio
from durable_agents.activities.tools.mcp_toolset import McpToolsets
from durable_agents.activities.tools.tool_identity import DEFAULT_TOOL_USER, ToolIdentityError

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="a worker that is not root runs its tools as itself"
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def private_clone() -> Iterator[Path]:
    """`mktemp -d` (0700), holding a clone whose .venv's python links to this python."""
    top = Path(tempfile.mkdtemp(prefix="private-clone-"))
    try:
        venv = top / "clone" / ".venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
        (venv / "bin" / "python3").symlink_to("python")
        base = Path(os.path.realpath(sys.executable)).parent
        (venv / "pyvenv.cfg").write_text(f"home = {base}\ninclude-system-site-packages = false\n")
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


async def _refusal(server: McpStdio) -> str:
    began = time.monotonic()
    with pytest.raises(ToolIdentityError) as refused:
        await McpToolsets([server]).start()
    assert time.monotonic() - began < 5, "refused only after the server was tried"
    message = str(refused.value)
    assert "\n" not in message
    return message


async def test_a_private_venvs_python_is_refused_naming_the_directory_and_what_to_do(
    private_clone: Path,
) -> None:
    python = private_clone / "clone" / ".venv" / "bin" / "python"
    server = McpStdio("mine", str(python), ("-m", "tests.mcp_servers.toolbox"), cwd="/")
    message = await _refusal(server)
    assert f"'mine' runs as {DEFAULT_TOOL_USER!r}" in message
    assert f"execute {python}" in message
    assert f"{private_clone} (mode 700, root's) is closed to it" in message
    assert "the virtualenv and the python it was made from" in message
    assert "AGENT_TOOL_USER" in message


async def test_a_bare_python_found_first_in_a_private_venv_is_refused_not_swapped(
    private_clone: Path,
) -> None:
    """`python3` with the venv first on PATH is the venv's python for the worker; the tool
    user, skipping the directory it cannot enter, would find /usr/bin/python3, without the
    venv's packages. It is refused as the venv's."""
    bin_dir = private_clone / "clone" / ".venv" / "bin"
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    server = McpStdio("mine", "python3", ("-m", "tests.mcp_servers.toolbox"), env=env, cwd="/")
    message = await _refusal(server)
    assert f"execute {bin_dir / 'python3'}" in message
    assert f"{private_clone} (mode 700, root's) is closed to it" in message
