"""The collect_garbage activity: one mark-and-sweep pass over the artifact store, and the
decision requests a client staged and never sent (storage/decision_requests.py).

Holds the claim check keeps for other SDKs' workflow histories are settled first, from what
Temporal says of those workflows (activities/history_holds.py), so the mark sees them as
they are now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.heartbeat import heartbeating
from durable_agents.activities.history_holds import settle_history_holds
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.decision_requests import sweep_stale_requests
from durable_agents.storage.gc import collect
from durable_agents.storage.workspace_lifecycle import sweep_workspaces
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workflows.contracts import GcInput, GcResult


class GcActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        workspaces: WorkspaceLayout | None = None,
    ) -> None:
        """`workspaces`: also sweep session workspaces nothing needs (see sweep_workspaces)."""
        self._sessions = sessions
        self._store = store
        self._workspaces = workspaces

    @activity.defn(name="collect_garbage")
    async def collect_garbage(self, inp: GcInput) -> GcResult:
        async with heartbeating():
            if not inp.dry_run:
                async with self._sessions() as db, db.begin():
                    await sweep_stale_requests(db, datetime.now(UTC))
                await settle_history_holds(
                    self._sessions,
                    activity.client(),
                    now=datetime.now(UTC),
                    window=timedelta(seconds=inp.window_seconds),
                )
            report = await collect(
                self._sessions,
                self._store,
                now=datetime.now(UTC),
                window=timedelta(seconds=inp.window_seconds),
                tenant_id=inp.tenant_id,
                dry_run=inp.dry_run,
            )
            if self._workspaces is not None:
                await sweep_workspaces(
                    self._sessions,
                    self._workspaces,
                    now=datetime.now(UTC),
                    window=timedelta(seconds=inp.window_seconds),
                    tenant_id=inp.tenant_id,
                    dry_run=inp.dry_run,
                )
        return GcResult(
            marked=report.marked,
            revived=report.revived,
            swept=len(report.swept),
            orphans=len(report.orphans),
            bytes_reclaimed=report.bytes_reclaimed,
            dry_run=report.dry_run,
        )
