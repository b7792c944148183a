"""The README's "Write your own agent" example, run as written: its two files in a fresh
directory, the agent program in a process of its own against the test stack."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import uuid
from pathlib import Path

from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.helpers import items_of
from tests.support.mcp import OWN_USER

README = Path(__file__).resolve().parents[1] / "README.md"


def example_files() -> dict[str, str]:
    """The section's python blocks, by the file name their first comment gives."""
    section = README.read_text().split("## Write your own agent", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    files = {}
    for block in blocks:
        name = re.match(r"# (\S+\.py)", block)
        assert name is not None, "each example block starts with '# FILE.py'"
        files[name.group(1)] = block
    return files


def test_the_example_is_short_and_its_command_runs_the_agent_file() -> None:
    files = example_files()
    assert set(files) == {"notes_server.py", "my_agent.py"}
    code = [ln for text in files.values() for ln in text.splitlines() if ln.strip()]
    assert len(code) <= 30
    assert "MODEL_PROVIDER=offline .venv/bin/python my_agent.py" in README.read_text()


async def test_the_readme_example_runs_as_written(
    migrated: StackEndpoints, resources: Resources, tmp_path: Path, tenant: str
) -> None:
    for name, text in example_files().items():
        (tmp_path / name).write_text(text)
    env = {
        **os.environ,
        **migrated.env(),
        "AGENT_TASK_QUEUE": f"readme-{uuid.uuid4().hex[:8]}",
        "MODEL_PROVIDER": "offline",
        "AGENT_TENANT_ID": tenant,
        "AGENT_WORKSPACE": str(tmp_path / "workspace"),
        # As root, the example's stdio server would run as nobody, who cannot reach this
        # venv or tmp_path (0700 directories on the way): the README says to name a user.
        "AGENT_TOOL_USER": OWN_USER,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "my_agent.py",
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
