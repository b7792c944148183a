"""The README's "Write your own agent" example, run as written: its two files in a fresh
directory, and its command's second line, as a shell runs it, in a process of its own against
the test stack. The first line, `agentctl dev up`, is parsed only: the test stack is the
"stack the environment points at" its comment allows (the stack's variables are set), so the
suite starts no second stack."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import sys
from pathlib import Path

from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.deploy_env import agentctl_error
from tests.support.doc_blocks import doc_block
from tests.support.helpers import items_of

VENV = Path(sys.executable).parent.parent  # the suite's own, which the command names .venv


def example_files() -> dict[str, str]:
    """The section's python blocks, by the file name their first comment gives."""
    blocks = [
        doc_block("README.md", "# notes_server.py: "),
        doc_block("README.md", "# my_agent.py: "),
    ]
    files = {}
    for block in blocks:
        name = re.match(r"# (\S+\.py)", block.text)
        assert name is not None, "each example block starts with '# FILE.py'"
        files[name.group(1)] = block.text
    return files


def commands() -> tuple[str, str]:
    """The example's two command lines: the stack, then the agent program."""
    block = doc_block("README.md", ".venv/bin/agentctl dev up --model-provider offline &")
    stack, program = block.text.splitlines()
    return stack, program


def test_the_example_is_short_and_its_stack_command_parses() -> None:
    files = example_files()
    assert set(files) == {"notes_server.py", "my_agent.py"}
    code = [ln for text in files.values() for ln in text.splitlines() if ln.strip()]
    assert len(code) <= 30
    stack, program = commands()
    argv = shlex.split(stack, comments=True)
    assert argv[0] == ".venv/bin/agentctl" and argv[-1] == "&"
    assert agentctl_error(["agentctl", *argv[1:-1]]) is None
    assert shlex.split(program)[-2:] == [".venv/bin/python", "my_agent.py"]


async def test_the_readme_example_runs_as_written(
    migrated: StackEndpoints, resources: Resources, tmp_path: Path, tenant: str
) -> None:
    for name, text in example_files().items():
        (tmp_path / name).write_text(text)
    (tmp_path / ".venv").symlink_to(VENV)
    _, program = commands()
    # The environment points at the test stack; the command line sets the rest itself.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "MODEL_"))},
        **migrated.env(),
        "AGENT_TENANT_ID": tenant,
        "AGENT_WORKSPACE": str(tmp_path / "workspace"),
    }
    # As root, the example's stdio server would run as nobody, who cannot reach this venv or
    # tmp_path (0700 directories on the way): the command names the user running it
    # (tests/support/mcp.py's OWN_USER, what the other stdio tests run their servers as).
    assert "AGENT_TOOL_USER=$(id -un)" in program
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        program,
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert out.decode().splitlines() == [
        "forecast: sunny in Oslo",
        "notes__note: release: ship on Friday",
    ]
    # What happened is in AgentState: the agent's session, both results, the approval.
    async with resources.sessions() as db:
        (session,) = await SessionRepository(db, tenant).recent()
    assert session.agent_definition == "helper" and session.status == "completed"
    items = await items_of(resources, tenant, str(session.id))
    results = [i for i in items if i.kind == ItemKind.TOOL_RESULT]
    assert sorted(i.tool_name or "" for i in results) == ["forecast", "notes__note"]
    assert all(i.artifact_id is not None for i in results)
    decisions = [i for i in items if i.kind == ItemKind.APPROVAL and "approved" in i.data]
    assert [d.data["approved"] for d in decisions] == [True]
