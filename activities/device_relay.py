"""The cloud side of a call for a device that holds only a device key.

offer_device_call runs on the cloud queue, one activity per call, and needs no Temporal
worker per device: it records the call for its device (storage/device_calls.py) with this
attempt's task token and returns without a result (asynchronous completion). Whichever
gateway process the device polls leases the call from PostgreSQL, and whichever gateway
it posts its result to verifies and commits it once under the call's idempotency key,
then completes this activity by the recorded task token (workers/device_dispatch/calls.py).

Why asynchronous completion rather than a workflow signal: the table already held the
newest attempt's task token, and the gateway already completed and heartbeat by it; the
workflow keeps one awaited activity per call, so its timeout (the device's wait plus the
tool's) and retry policy bound a device that never comes back exactly as a timeout, with
no new signal handler or wait in the loop (a smaller patch to replay).

A call already committed under its idempotency key is answered at once, so a retried
attempt never hands the device the call again.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.errors import non_retryable, storage_errors_are_final
from durable_agents.activities.gatekeeper import Gatekeeper
from durable_agents.activities.tool_run import call_arguments
from durable_agents.activities.tools.effects import latest_settlement
from durable_agents.activities.tools.outcomes import outcome_of
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.device_calls import DONE
from durable_agents.storage.devices import validate_device_id
from durable_agents.workflows.contracts import ToolOutcome, ToolRunInput


async def _hand_over(
    sessions: async_sessionmaker[AsyncSession],
    store_prefix: str,
    device_id: str,
    inp: ToolRunInput,
    gate: Gatekeeper,
) -> ToolOutcome | None:
    """Record the call for the device under this attempt's task token once the gate admits
    it; its outcome when it was committed already or was not admitted, else None (the
    gateway completes the attempt later)."""
    info = activity.info()
    async with storage_errors_are_final():
        async with agent_state(sessions, inp.tenant_id) as st:
            done = await st.items.by_key(inp.idempotency_key)
        if done is None:
            closed = await gate.admit_tool(inp)
            if closed is not None:
                return ToolOutcome(inp.tool_call_id, item_id="", ordinal=0, closed=closed)
    async with (
        storage_errors_are_final(),
        agent_state(sessions, inp.tenant_id, write=True) as st,
    ):
        items = st.items
        done = await items.by_key(inp.idempotency_key)
        if done is not None:
            return outcome_of(await latest_settlement(items, done), inp.tenant_id, store_prefix)
        # A call missing from AgentState fails here, typed, never in a device's poll.
        await call_arguments(st.calls, uuid.UUID(inp.session_id), inp.tool_call_id)
        row = await st.device_calls(device_id).offer(
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
            # Committed by a gateway while this attempt waited on the row's lock.
            done = await items.by_key(inp.idempotency_key)
            if done is None:
                raise non_retryable("DeviceCallLost", "a done device call has no result")
            return outcome_of(await latest_settlement(items, done), inp.tenant_id, store_prefix)
    return None


class DeviceDispatchActivities:
    """offer_device_call, on the cloud worker: one activity per device call."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        store_prefix: str,
        gate: Gatekeeper | None = None,
    ) -> None:
        """`store_prefix`: the artifact store's key prefix, for the refs of the outcomes;
        `gate`: what admits each call (default: the kill switch and budgets, no quotas)."""
        self._sessions = sessions
        self._store_prefix = store_prefix
        self._gate = gate or Gatekeeper(sessions)

    @activity.defn(name="offer_device_call")
    async def offer_device_call(self, inp: ToolRunInput) -> ToolOutcome:
        """Record the call for `inp.device_id`; completed later by a gateway."""
        try:
            device_id = validate_device_id(inp.device_id or "")
        except ValueError as err:
            raise non_retryable("InvalidDeviceId", "the call names no valid device") from err
        outcome = await _hand_over(self._sessions, self._store_prefix, device_id, inp, self._gate)
        if outcome is not None:
            return outcome
        activity.raise_complete_async()
