"""agentctl archive: move idle sessions to the cold tier, or bring one back."""

from __future__ import annotations

from typing import Annotated

import typer

from durable_agents.storage.archive import (
    ArchiveResult,
    archive_idle_sessions,
    archive_session,
    rehydrate_session,
)
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workers.cli.common import (
    Tenant,
    console,
    err_console,
    run_async,
    tenant_or_default,
    with_resources,
)
from durable_agents.workers.cli.gc import parse_duration
from durable_agents.workers.client.tasks import session_uuid
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings, workspace_layout

# One run archives at most this many; a larger backlog takes several runs.
MAX_PER_RUN = 10_000


def _layout() -> WorkspaceLayout:
    # Archive runs where the cloud workers' workspace volume is mounted (AGENT_WORKSPACE).
    return workspace_layout(get_settings().agent)


def _print_kept(result: ArchiveResult) -> None:
    """A workspace whose pack could not hold everything stays on disk: say what and why."""
    err_console.print(
        f"  workspace of {result.session_id} kept on disk: its pack left out "
        f"{result.workspace_left_out_count} entries",
        markup=False,
        highlight=False,
    )
    for left in result.workspace_left_out:
        err_console.print(f"    {left.path!r}: {left.why}", markup=False, highlight=False)
    if result.workspace_left_out_count > len(result.workspace_left_out):
        more = result.workspace_left_out_count - len(result.workspace_left_out)
        err_console.print(f"    ... and {more} more", markup=False, highlight=False)


archive_app = typer.Typer(
    no_args_is_help=True, help="The cold tier: one compressed snapshot per idle session."
)


@archive_app.command("idle")
def idle(
    older_than: Annotated[
        str, typer.Option("--for", metavar="DURATION", help="Idle for at least, e.g. 7d.")
    ] = "7d",
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_PER_RUN, help="At most this many per run.")
    ] = 100,
    tenant: Tenant = None,
) -> None:
    """Archive ended sessions that have been idle for a while.

    A session that fails is reported and the run goes on; the exit code is then 1."""
    idle_for, t = parse_duration(older_than), tenant_or_default(tenant)

    async def go(res: Resources) -> int:
        report = await archive_idle_sessions(
            res.sessions, res.store, t, idle_for=idle_for, limit=limit, workspaces=_layout()
        )
        for session_id in report.archived:
            console.print(f"  archived {session_id}")
        for kept in report.kept:
            _print_kept(kept)
        for failed in report.failed:
            err_console.print(
                f"  failed {failed.session_id}: {failed.error_type}: {failed.message}",
                markup=False,
                highlight=False,
            )
        summary = f"archived {len(report.archived)} sessions idle for {older_than} or more"
        if report.failed:
            summary += f"; {len(report.failed)} failed (they stay hot, nothing was removed)"
        console.print(summary)
        return 1 if report.failed else 0

    code = run_async(with_resources(go))
    if code:
        raise typer.Exit(code)


@archive_app.command("session")
def one(session: str, tenant: Tenant = None) -> None:
    """Archive one ended session now."""
    sid, t = session_uuid(session), tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        result = await archive_session(res.sessions, res.store, t, sid, workspaces=_layout())
        state = "archived" if result.created else "already archived"
        console.print(
            f"{state}: {result.item_count} items in {result.snapshot_bytes} B "
            f"(sha256 {result.snapshot_sha256[:16]})"
        )
        if result.workspace_sha256:
            console.print(f"  workspace packed (sha256 {result.workspace_sha256[:16]})")
        if result.workspace_kept:
            _print_kept(result)

    run_async(with_resources(go))


@archive_app.command("restore")
def restore(session: str, tenant: Tenant = None) -> None:
    """Bring an archived session back to the hot tables (reads do this by themselves)."""
    sid, t = session_uuid(session), tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        result = await rehydrate_session(res.sessions, res.store, t, sid, workspaces=_layout())
        state = "restored" if result.restored else "already hot"
        console.print(f"{state}: {result.item_count} items, status {result.status}")

    run_async(with_resources(go))
