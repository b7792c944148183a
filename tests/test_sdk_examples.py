"""docs/other-sdks.md's offline examples, run as documented: each script in a process of its
own from the repository's root, against the test stack (pydantic-ai with its TestModel, the
OpenAI Agents SDK with the fake Chat Completions server the script starts). Each prints its
answer and where its payloads went; the history, read here by a client without our plugin,
holds references, and every object the run stored is held for its workflow. The page's
sample of what the OpenAI Agents SDK's example prints is checked against what it printed
here (ids and numbers aside; the test's tenant and store stand in for the defaults)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

# The `peers` extra (pyproject.toml): the SDKs whose agents these are.
pytest.importorskip("pydantic_ai.durable_exec.temporal")
pytest.importorskip("temporalio.openai_agents")

from temporalio.api.history.v1 import History
from temporalio.client import Client

from durable_agents.storage.claim_holds import holds_of
from durable_agents.workers.dev_env import NO_STACK, STACK_VARIABLES
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import S3Settings
from durable_agents.workers.stack import StackEndpoints
from tests.support.doc_blocks import DocBlock, doc_block
from tests.support.helpers import s3_keys
from tests.support.output_samples import unmatched

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    # The script, and the answer its model gives.
    "pydantic_ai_offline.py": "The build log is read: every step passed.",
    "openai_agents_offline.py": "The log has 401 lines: the build passed.",
}
LOG_LINES = 401
PRINTED = ["answer", "tool result", "history", "lines of the log in the history", "workflow"]
SAMPLED = "openai_agents_offline.py"  # the example whose output the page shows
DEFAULT_TENANT = "acme"  # the examples' AGENT_TENANT_ID default


def sample() -> DocBlock:
    return doc_block("docs/other-sdks.md", "answer: ")


def commands_and_listings() -> dict[str, tuple[str, DocBlock]]:
    """Each example: the command that runs it, and the block that shows its file."""
    (pydantic_ai, openai_agents) = doc_block(
        "docs/other-sdks.md", ".venv/bin/python docs/examples/pydantic_ai_offline.py"
    ).text.splitlines()
    return {
        "pydantic_ai_offline.py": (
            pydantic_ai,
            doc_block("docs/other-sdks.md", '--8<-- "docs/examples/pydantic_ai_offline.py"'),
        ),
        "openai_agents_offline.py": (
            openai_agents,
            doc_block("docs/other-sdks.md", '--8<-- "docs/examples/openai_agents_offline.py"'),
        ),
    }


async def run_example(name: str, env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """`.venv/bin/python docs/examples/NAME` (this interpreter is the venv's)."""
    script = "docs/examples/" + name if cwd == ROOT else str(ROOT / "docs" / "examples" / name)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return await proc.wait(), out.decode(), err.decode()


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_the_page_shows_the_example_and_its_command(name: str) -> None:
    """The command the test runs, and the file as the site includes it (pymdownx.snippets)."""
    command, listing = commands_and_listings()[name]
    assert command == f".venv/bin/python docs/examples/{name}"
    assert listing.text == f'--8<-- "docs/examples/{name}"\n'
    assert (ROOT / "docs" / "examples" / name).is_file()


def test_the_page_shows_what_an_example_prints() -> None:
    shown = sample().text
    printed = dict(line.split(": ", 1) for line in shown.splitlines())
    assert list(printed) == PRINTED
    assert printed["answer"] in EXAMPLES.values()
    assert printed["lines of the log in the history"] == f"0 of {LOG_LINES}"


@pytest.mark.parametrize("name", list(EXAMPLES))
async def test_the_example_runs_as_documented_and_its_history_holds_references(
    name: str, migrated: StackEndpoints, resources: Resources, tenant: str
) -> None:
    env = {**os.environ, **migrated.env(), "AGENT_TENANT_ID": tenant}
    command, _ = commands_and_listings()[name]
    code, out, err = await run_example(command.rsplit("/", 1)[1], env, ROOT)
    assert code == 0, err[-3000:]
    printed = dict(line.split(": ", 1) for line in out.splitlines())
    assert list(printed) == PRINTED, out
    assert printed["answer"] == EXAMPLES[name]
    assert printed["tool result"].endswith(
        f"stored in s3://{resources.store.bucket}/{resources.store.prefix}/{tenant}/"
    )
    assert printed["lines of the log in the history"] == f"0 of {LOG_LINES}"
    if name == SAMPLED:
        store, default = resources.store, S3Settings.model_fields
        ours = f"s3://{store.bucket}/{store.prefix}/{tenant}/"
        theirs = f"s3://{default['bucket'].default}/{default['prefix'].default}/{DEFAULT_TENANT}/"
        assert unmatched(sample().text, out.replace(ours, theirs).splitlines()) == [], out

    # What a client without the plugin reads: references, none of the tool's output.
    workflow_id = printed["workflow"]
    client = await Client.connect(migrated.temporal_address, namespace="default")
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
    raw = History(events=events).SerializeToString()
    assert b"compiled module_" not in raw
    assert b"binary/durable-agents-claim-check" in raw
    keys = await s3_keys(resources, f"{resources.store.prefix}/{tenant}/")
    async with resources.sessions() as db:
        held = await holds_of(db, tenant, f"default/{workflow_id}")
    assert keys and len(held) == len(keys)  # every object the run stored is held for it


@pytest.mark.parametrize("name", list(EXAMPLES))
async def test_without_a_stack_the_example_says_so_in_one_line(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in STACK_VARIABLES}
    env["XDG_STATE_HOME"] = str(tmp_path)  # no per-user record; no .devstack/ in tmp_path
    code, out, err = await run_example(name, env, tmp_path)
    assert (code, out, err) == (1, "", f"error: {NO_STACK}\n")
