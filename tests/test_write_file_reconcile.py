"""write_file under the effects contract: an attempt that died between the write and the
commit is settled from the workspace, on the real database; a file that may have been
edited since is never clobbered."""

from __future__ import annotations

import json
from pathlib import Path

from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import ToolContext
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.files import write_file
from durable_agents.workers.resources import Resources
from tests.support.tool_calls import claim, ledger_state, new_call, result_of, run

PATH = "out/report.md"
CONTENT = "# Report\n\nwritten once\n"


def acts(res: Resources, root: Path) -> ToolActivities:
    return ToolActivities(res.sessions, res.store, default_registry(), workspace=root)


async def dead_attempt_wrote(root: Path, key: str) -> Path:
    """What the interrupted attempt did before it died: the write itself."""
    ctx = ToolContext(idempotency_key=key, workspace=root, tenant_id="t", session_id="s")
    await write_file(ctx, {"path": PATH, "content": CONTENT})
    return root / PATH


async def test_retry_after_the_write_landed_is_already_applied_and_rewrites_nothing(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    inp = await new_call(resources, tenant, "write_file", {"path": PATH, "content": CONTENT})
    await claim(resources, inp)
    target = await dead_attempt_wrote(tmp_path, inp.idempotency_key)
    before = target.stat()
    outcome = await run(acts(resources, tmp_path), inp)
    after = target.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "rewritten"
    assert not outcome.in_doubt and outcome.error_type is None
    result = await result_of(resources, inp)
    assert result["effect"] == "reconciled"
    assert json.loads(result["text"])["already_applied"] is True
    assert await ledger_state(resources, inp) == ("reconciled", 2)


async def test_a_file_edited_between_is_not_clobbered_and_the_call_is_in_doubt(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    inp = await new_call(resources, tenant, "write_file", {"path": PATH, "content": CONTENT})
    await claim(resources, inp)
    target = await dead_attempt_wrote(tmp_path, inp.idempotency_key)
    target.write_text("edited by a person after the write\n")
    outcome = await run(acts(resources, tmp_path), inp)
    assert target.read_text() == "edited by a person after the write\n", "clobbered"
    assert outcome.in_doubt
    result = await result_of(resources, inp)
    assert "may or may not have taken effect" in result["text"]
    assert "edited since" in result["text"]
    assert await ledger_state(resources, inp) == ("in_doubt", 2)


async def test_an_older_file_the_write_never_replaced_is_not_clobbered_either(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    # Died before the write: the file still holds what was there. Indistinguishable from
    # an edit made after the write, so a person decides.
    inp = await new_call(resources, tenant, "write_file", {"path": PATH, "content": CONTENT})
    (tmp_path / "out").mkdir()
    (tmp_path / PATH).write_text("the previous version\n")
    await claim(resources, inp)
    outcome = await run(acts(resources, tmp_path), inp)
    assert outcome.in_doubt
    assert (tmp_path / PATH).read_text() == "the previous version\n"


async def test_no_file_means_the_write_did_not_land_and_it_runs(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    inp = await new_call(resources, tenant, "write_file", {"path": PATH, "content": CONTENT})
    await claim(resources, inp)  # died after the claim, before the write
    outcome = await run(acts(resources, tmp_path), inp)
    assert not outcome.in_doubt
    assert (tmp_path / PATH).read_text() == CONTENT
    assert json.loads((await result_of(resources, inp))["text"])["already_applied"] is False
    assert await ledger_state(resources, inp) == ("completed", 2)
