"""agentctl gc: run or schedule the artifact garbage collector."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from durable_agents.storage.artifacts import check_tenant
from durable_agents.storage.gc import collect
from durable_agents.storage.workspace_lifecycle import sweep_workspaces
from durable_agents.workers.cli.common import (
    Tenant,
    console,
    run_async,
    temporal_client,
    with_resources,
)
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings, workspace_layout
from durable_agents.workflows.contracts import GcInput
from durable_agents.workflows.gc import ArtifactGcWorkflow

SCHEDULE_ID = "durable-agents-gc"
_DURATION = re.compile(r"^(\d+)([smhd])$")
# Longer than any retention anyone means; also keeps timedelta from overflowing.
MAX_DURATION = timedelta(days=3650)
# Temporal refuses shorter schedule intervals, and GC that often would only add load.
MIN_GC_EVERY = timedelta(minutes=1)

gc_app = typer.Typer(help="Collect unreferenced artifacts (mark-and-sweep with a safety window).")


def parse_duration(text: str, *, minimum: timedelta = timedelta(0)) -> timedelta:
    """`30m`, `24h`, `7d`... as a timedelta between `minimum` and MAX_DURATION."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30m, 24h, 7d)")
    seconds = int(match[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"duration {text!r} is longer than {MAX_DURATION.days} days")
    if seconds < minimum.total_seconds():
        raise ValueError(f"duration {text!r} is shorter than {minimum}")
    return timedelta(seconds=seconds)


Window = Annotated[
    str, typer.Option(metavar="DURATION", help="Safety window before anything is deleted.")
]


@gc_app.callback(invoke_without_command=True)
def gc(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option(help="Print what would go, delete nothing.")] = False,
    window: Window = "24h",
    tenant: Tenant = None,
) -> None:
    """Run one GC pass now (subcommand `schedule` runs it periodically on Temporal)."""
    if ctx.invoked_subcommand is not None:
        return
    keep = parse_duration(window)
    if tenant is not None:
        check_tenant(tenant)

    async def go(res: Resources) -> None:
        report = await collect(
            res.sessions,
            res.store,
            now=datetime.now(UTC),
            window=keep,
            tenant_id=tenant,
            dry_run=dry_run,
        )
        verb = "would delete" if dry_run else "deleted"
        for t, sha, size in report.swept:
            console.print(f"  {verb} artifact {t}/{sha[:16]} ({size} B)", soft_wrap=True)
        for key, size in report.orphans:
            console.print(f"  {verb} orphan {key} ({size} B)", soft_wrap=True)
        console.print(
            f"marked {report.marked} unreachable, revived {report.revived}; {verb} "
            f"{len(report.swept)} artifacts and {len(report.orphans)} orphans, "
            f"{report.bytes_reclaimed} bytes{' (dry run)' if dry_run else ''}"
        )
        swept = await sweep_workspaces(
            res.sessions,
            workspace_layout(get_settings().agent),
            now=datetime.now(UTC),
            window=keep,
            tenant_id=tenant,
            dry_run=dry_run,
        )
        for path in swept.removed:
            console.print(f"  {verb} workspace {path.parent.name}/{path.name}", soft_wrap=True)
        console.print(f"{verb} {len(swept.removed)} session workspaces, kept {swept.kept}")

    run_async(with_resources(go))


@gc_app.command("schedule")
def schedule(
    every: Annotated[str, typer.Option(metavar="DURATION", help="How often, e.g. 1h.")] = "1h",
    window: Window = "24h",
) -> None:
    """Create or update the Temporal Schedule that runs GC on the cloud worker."""
    try:
        interval = parse_duration(every, minimum=MIN_GC_EVERY)
    except ValueError as err:
        raise ValueError(f"--every: {err}") from None
    keep = parse_duration(window)
    queue = get_settings().agent.task_queue

    async def go() -> str:
        client = await temporal_client()
        sched = Schedule(
            action=ScheduleActionStartWorkflow(
                ArtifactGcWorkflow.run,
                GcInput(window_seconds=keep.total_seconds()),
                id=f"{SCHEDULE_ID}-run",
                task_queue=queue,
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=interval)]),
        )
        try:
            await client.create_schedule(SCHEDULE_ID, sched)
            return "created"
        except ScheduleAlreadyRunningError:

            def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
                return ScheduleUpdate(schedule=sched)

            await client.get_schedule_handle(SCHEDULE_ID).update(replace)
            return "updated"

    console.print(f"{run_async(go())} schedule {SCHEDULE_ID}: every {every}, window {window}")
