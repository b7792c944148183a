"""run_tool for a device that holds only a device key: the cloud side of a device call.

It polls the device's own queue (device:{tenant}:{id}) in the gateway process while the
device is connected, records the call for that device (storage/device_calls.py) with this
attempt's task token, and returns without a result (asynchronous completion). The gateway
completes the activity once the device's uploaded result was verified and committed
(workers/gateway/device_calls.py). A call already committed under its idempotency key is
answered at once, so a retried attempt never hands the device the call again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from activities.errors import non_retryable, storage_errors_are_final
from activities.tool_effects import latest_settlement
from activities.tool_run import call_arguments, outcome_of
from storage.device_calls import DONE, DeviceCallRepository
from storage.items import ItemRepository
from workflows.contracts import ToolOutcome, ToolRunInput


class DeviceRelayActivities:
    """run_tool for one (tenant, device); `offered` is called after each hand-over, so a
    waiting long-poll of the device wakes at once."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        tenant_id: str,
        device_id: str,
        offered: Callable[[], None] = lambda: None,
        *,
        store_prefix: str,
    ) -> None:
        """`store_prefix`: the artifact store's key prefix, for the refs of the outcomes."""
        self._sessions = sessions
        self._store_prefix = store_prefix
        self._tenant = tenant_id
        self._device = device_id
        self._offered = offered

    @activity.defn(name="run_tool")
    async def run_tool(self, inp: ToolRunInput) -> ToolOutcome:
        """Hand the call to the device; completed later by the gateway."""
        if inp.tenant_id != self._tenant:
            # The queue name carries the tenant; a mismatch is a bug or a forged schedule.
            raise non_retryable("TenantMismatch", "a call of another tenant on this queue")
        info = activity.info()
        async with storage_errors_are_final(), self._sessions() as db, db.begin():
            items = ItemRepository(db, inp.tenant_id)
            done = await items.by_key(inp.idempotency_key)
            if done is not None:
                return outcome_of(
                    await latest_settlement(items, done), inp.tenant_id, self._store_prefix
                )
            # A call missing from AgentState fails here, typed, never in a device's poll.
            await call_arguments(items, uuid.UUID(inp.session_id), inp.tool_call_id)
            row = await DeviceCallRepository(db, self._tenant, self._device).offer(
                idempotency_key=inp.idempotency_key,
                session_id=uuid.UUID(inp.session_id),
                tool_call_id=inp.tool_call_id,
                tool_name=inp.name,
                step=inp.step,
                rerun=inp.rerun,
                task_token=info.task_token,
                attempt=info.attempt,
            )
            if row.state == DONE:
                # Committed by the gateway while this attempt waited on the row's lock.
                done = await items.by_key(inp.idempotency_key)
                if done is None:
                    raise non_retryable("DeviceCallLost", "a done device call has no result")
                return outcome_of(
                    await latest_settlement(items, done), inp.tenant_id, self._store_prefix
                )
        self._offered()
        activity.raise_complete_async()
