"""Settling the claim check's holds from what Temporal says of their workflows.

The claim check (workers/peers/claim_check.py) holds each object it writes for the workflow whose
history names it, as "<namespace>/<workflow id>" (storage/claim_holds.py). Before a GC pass
marks anything, each workflow with a hold not yet settled (or settled to a time that has
come) is described, latest run:

- running: held, with no end (a reused id re-opens holds its previous run had settled);
- closed: held until its close time plus the namespace's retention, when Temporal deletes
  the history; past that, holds older than the safety window are dropped;
- not found (its history already deleted, or a start that never happened): holds older
  than the window are dropped; younger ones may belong to a start still on its way.

The latest run closes last, so its retention ends last: holding to it is the conservative
answer for every run of that id. Only this worker's namespace is looked at: a hold of
another namespace cannot be judged from here and stays.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.storage.claim_holds import owners_to_settle, release, settle

logger = logging.getLogger(__name__)


@dataclass
class HoldsReport:
    open: int = 0
    settled: int = 0
    released: int = 0


async def retention_of(client: Client) -> timedelta:
    response = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=client.namespace)
    )
    ttl: timedelta = response.config.workflow_execution_retention_ttl.ToTimedelta()
    return ttl


async def settle_history_holds(
    sessions: async_sessionmaker[AsyncSession],
    client: Client,
    *,
    now: datetime,
    window: timedelta,
) -> HoldsReport:
    """Bring every due hold of this namespace in line with its workflow (see module doc)."""
    report = HoldsReport()
    prefix = f"{client.namespace}/"
    async with sessions() as db:
        owners = await owners_to_settle(db, now, prefix=prefix)
    if not owners:
        return report
    retention = await retention_of(client)
    for owner in owners:
        workflow_id = owner.owner_id.removeprefix(prefix)
        try:
            described = await client.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            described = None
        async with sessions() as db, db.begin():
            if described is None:
                report.released += await release(
                    db, owner.tenant_id, owner.owner_id, held_before=now - window
                )
            elif described.status == WorkflowExecutionStatus.RUNNING or not described.close_time:
                await settle(db, owner.tenant_id, owner.owner_id, None)
                report.open += 1
            elif (until := described.close_time + retention) > now:
                await settle(db, owner.tenant_id, owner.owner_id, until)
                report.settled += 1
            else:
                report.released += await release(
                    db, owner.tenant_id, owner.owner_id, held_before=now - window
                )
    logger.info(
        "history holds: %d open, %d settled, %d released",
        report.open,
        report.settled,
        report.released,
    )
    return report
