"""A tool result item no longer repeats its artifact's store key (derived from tenant and
sha256); the ref run_tool reports still names the object, and results
written before, with a key of their own, keep reporting that key."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import update

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry
from durable_agents.activities.tools.outcomes import outcome_of
from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources
from tests.support.helpers import s3_sha256, stored_key
from tests.support.tool_calls import new_call, run


async def _big(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    return ToolOutput("".join(f"line {i}\n" for i in range(3000)).encode())


BIG = Tool(ToolSpec("big", "A long output.", {"type": "object"}), _big)


async def _big_result(resources: Resources, workspace: Path, tenant: str) -> tuple[ItemRow, str]:
    inp = await new_call(resources, tenant, "big")
    acts = ToolActivities(
        resources.sessions, resources.store, ToolRegistry.of([BIG]), workspace=workspace
    )
    outcome = await run(acts, inp)
    assert outcome.ref is not None, outcome
    async with resources.sessions() as db:
        row = await db.get(ItemRow, (tenant, uuid.UUID(outcome.item_id)))
    assert row is not None
    return row, outcome.ref.key


async def test_a_result_keeps_no_key_and_its_ref_names_the_stored_object(
    resources: Resources, workspace: Path, tenant: str
) -> None:
    row, ref_key = await _big_result(resources, workspace, tenant)
    info = row.data["artifact"]
    assert "key" not in info and set(info) == {"sha256", "size_bytes", "content_type"}
    assert ref_key == stored_key(resources, row)
    assert await s3_sha256(resources, ref_key) == info["sha256"]


async def test_a_result_written_with_its_key_reports_that_key(
    resources: Resources, workspace: Path, tenant: str
) -> None:
    row, _ = await _big_result(resources, workspace, tenant)
    old_key = f"older-prefix/{tenant}/sha256/{row.data['artifact']['sha256']}"
    data = {**row.data, "artifact": {**row.data["artifact"], "key": old_key}}
    async with resources.sessions() as db, db.begin():
        await db.execute(update(ItemRow).where(ItemRow.id == row.id).values(data=data))
    async with resources.sessions() as db:
        old = await db.get(ItemRow, (tenant, row.id))
    assert old is not None
    outcome = outcome_of(old, tenant, resources.store.prefix)
    assert outcome.ref is not None and outcome.ref.key == old_key
