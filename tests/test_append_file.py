"""append_file: lines added at the end of a text file, every byte before them kept; a
missing file is created unasked and one that exists asks first; a call retried under its
key adds its lines once, and one that cannot tell is in doubt, never added twice."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.file_append import append_file
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ToolOutcome, ToolRunInput
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, session_root, start, wait_for_pending
from tests.support.tool_calls import approved, claim, ledger_state, new_call, result_of, run

REPORT = "out/report.md"
FIRST = "- README.md: the weather station project"
SECOND = "- data/readings.csv: temperature and humidity by station"


def _ctx(root: Path, *, must_be_new: frozenset[str] = frozenset()) -> ToolContext:
    return ToolContext(
        idempotency_key="k", workspace=root, tenant_id="t", session_id="s", must_be_new=must_be_new
    )


async def _append(
    root: Path, content: str, path: str = REPORT, **kw: frozenset[str]
) -> dict[str, Any]:
    told: dict[str, Any] = json.loads(
        (await append_file(_ctx(root, **kw), {"path": path, "content": content})).content
    )
    return told


async def test_lines_go_after_what_is_there_each_on_lines_of_their_own(tmp_path: Path) -> None:
    told = await _append(tmp_path, FIRST)
    # A missing file and its directory are created; the line ends in a newline.
    assert (tmp_path / REPORT).read_text() == FIRST + "\n"
    assert told["line"] == 1 and told["already_applied"] is False
    (tmp_path / REPORT).write_text("# Report\n" + FIRST)  # no newline at its end
    told = await _append(tmp_path, SECOND + "\n")
    assert (tmp_path / REPORT).read_text() == f"# Report\n{FIRST}\n{SECOND}\n"
    assert told["line"] == 3
    # The model sees the added line as the file now reads, two lines before it.
    assert told["now_reads"] == f"# Report\n{FIRST}\n{SECOND}"
    assert told["bytes"] == len((tmp_path / REPORT).read_bytes())


async def test_bad_input_is_an_error_and_the_file_is_untouched(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / REPORT).write_text(FIRST + "\n")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "link.md").symlink_to(tmp_path / REPORT)
    before = os.stat(tmp_path / REPORT)
    cases = {
        "  \n": ("InvalidArguments", REPORT),
        "x": ("NotText", "blob.bin"),
    }
    for content, (kind, path) in cases.items():
        with pytest.raises(ToolError) as err:
            await _append(tmp_path, content, path)
        assert err.value.error_type == kind
    for path in ("../outside.md", "/etc/passwd", "link.md", "out"):
        with pytest.raises(ToolError):
            await _append(tmp_path, SECOND, path)
    after = os.stat(tmp_path / REPORT)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (tmp_path / "blob.bin").read_bytes() == b"\xff\xfe\x00binary"
    assert not (tmp_path.parent / "outside.md").exists()


async def test_a_call_let_through_because_the_file_was_missing_keeps_one_that_appeared(
    tmp_path: Path,
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / REPORT).write_text("written by somebody else\n")
    with pytest.raises(ToolError) as err:
        await _append(tmp_path, FIRST, must_be_new=frozenset({"path"}))
    assert err.value.error_type == "FileExists"
    assert (tmp_path / REPORT).read_text() == "written by somebody else\n"


async def test_a_missing_file_is_created_unasked_and_one_that_exists_asks_first(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    report = session_root(workspace, tenant, sid) / REPORT
    provider = ScriptedProvider.from_data(
        [
            {"tool_calls": [{"name": "append_file", "arguments": {"path": REPORT, "content": c}}]}
            for c in (FIRST, SECOND)
        ]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        assert await wait_for_pending(client, session_id) == ["call_1_0"]
        assert report.read_text() == FIRST + "\n"
        await verbs.approve(
            client, session_id, "call_1_0", "alice", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert report.read_text() == f"{FIRST}\n{SECOND}\n"
    items = await items_of(resources, tenant, session_id)
    assert [i.tool_call_id for i in items if i.kind == "approval"] == ["call_1_0"]


def _acts(res: Resources, root: Path) -> ToolActivities:
    return ToolActivities(res.sessions, res.store, default_registry(), workspace=root)


async def _interrupted(
    res: Resources, tenant: str, root: Path, there: str
) -> tuple[ToolRunInput, ToolOutcome]:
    """An approved append of SECOND to a report reading `there`, whose first attempt died
    between its claim and its commit, run again."""
    (root / "out").mkdir()
    (root / REPORT).write_text(there)
    inp = await new_call(res, tenant, "append_file", {"path": REPORT, "content": SECOND})
    await approved(res, inp)
    await claim(res, inp)
    return inp, await run(_acts(res, root), inp)


async def test_an_interrupted_append_that_landed_is_not_added_again(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    inp, outcome = await _interrupted(resources, tenant, tmp_path, f"{FIRST}\n{SECOND}\n")
    assert not outcome.in_doubt and outcome.error_type is None
    assert (tmp_path / REPORT).read_text() == f"{FIRST}\n{SECOND}\n"
    assert json.loads((await result_of(resources, inp))["text"])["already_applied"] is True
    # Run again under its key: the committed result, nothing added.
    again = await run(_acts(resources, tmp_path), inp)
    assert again.item_id == outcome.item_id
    assert (tmp_path / REPORT).read_text() == f"{FIRST}\n{SECOND}\n"


async def test_an_interrupted_append_that_never_landed_runs(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    inp, outcome = await _interrupted(resources, tenant, tmp_path, f"{FIRST}\n")
    assert not outcome.in_doubt and outcome.error_type is None
    assert (tmp_path / REPORT).read_text() == f"{FIRST}\n{SECOND}\n"
    assert await ledger_state(resources, inp) == ("completed", 2)


@pytest.mark.parametrize("there", [f"{SECOND}\n{SECOND}\n", f"{SECOND}\n"], ids=["twice", "only"])
async def test_an_interrupted_append_whose_file_reads_the_same_before_and_after_is_in_doubt(
    resources: Resources, tenant: str, tmp_path: Path, there: str
) -> None:
    # Its lines twice at the end, or a file of exactly them that was there to be asked
    # about: the append may have landed or not, and adding them again could double them.
    inp, outcome = await _interrupted(resources, tenant, tmp_path, there)
    assert outcome.in_doubt
    assert (tmp_path / REPORT).read_text() == there
    assert await ledger_state(resources, inp) == ("in_doubt", 2)
