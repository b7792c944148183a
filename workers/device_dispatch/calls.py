"""Device calls, the cloud side: hand a device its next call, renew its lease, and accept
its result only once the uploaded object was read back and matched.

Upload -> verify -> commit holds as on the cloud: the device PUTs its result bytes to a
presigned URL bound to this call's staging key (uploads.py); on completion the dispatch
reads that object, checks its size and sha256 against what the device claims, stores it
content-addressed (ArtifactStore.put verifies again), commits the tool_result under the
call's idempotency key (commit_tool_result, once per key) and only then completes the
Temporal activity with the task token it kept. A mismatch commits nothing and offers the
call again. The device never holds a database, S3 or Temporal credential.

Nothing here is per process: calls, leases and results live in PostgreSQL, so a device may
poll one gateway, renew through a second and complete through a third. Two completions of
one call (a retry, or two gateways) commit once: the row is locked, and the result is
upserted under the call's idempotency key.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.tools.effects import EFFECT_IN_DOUBT
from durable_agents.activities.tools.mcp_device import device_mcp_tools
from durable_agents.activities.tools.mcp_servers import McpListingError
from durable_agents.activities.tools.outcomes import outcome_of
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.device_calls import DONE
from durable_agents.storage.device_models import DeviceCallRow
from durable_agents.storage.models import ItemRow
from durable_agents.storage.quotas import TenantFrozen
from durable_agents.storage.tool_effects import EffectState
from durable_agents.storage.tool_results import ToolResult, VerifiedArtifact, commit_tool_result
from durable_agents.workers.device_dispatch.errors import (
    AlreadyCommitted,
    InvalidDeviceRequest,
    NoSuchCall,
    NotLeased,
    NotRegistered,
    PollEnded,
    ResultRefused,
)
from durable_agents.workers.device_dispatch.payloads import Completion, Offer, UploadTarget
from durable_agents.workers.device_dispatch.uploads import (
    Mismatch,
    forget_upload,
    read_back,
    upload_target,
)
from durable_agents.workers.device_dispatch.wakes import DeviceWakes

logger = logging.getLogger(__name__)

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
# How often a waiting poll looks at the table anyway: a lease that ran out notifies
# nobody, and a lost LISTEN connection misses wake-ups (bench/device_dispatch.py: each
# waiting poll costs one indexed read per period).
RECHECK_SECONDS = 5.0


def _call_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NoSuchCall() from None


class DeviceCalls:
    """The verbs a device speaks on its own calls. The tenant and the device are the ones
    its key speaks for: every read and write is bound to both."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        client: Client,
        wakes: DeviceWakes,
        *,
        lease_seconds: int,
    ) -> None:
        """`lease_seconds`: how long a lease lasts unrenewed. A device renews well within
        it; a device gone this long is taken as gone (the call's Temporal heartbeat
        timeout is 30 s, the default lease)."""
        self._sessions = sessions
        self._store = store
        self._client = client
        self._wakes = wakes
        self._lease_seconds = lease_seconds
        self._lease = timedelta(seconds=lease_seconds)

    async def register(
        self, tenant: str, device: str, tools: list[str], specs: list[dict[str, Any]] | None
    ) -> None:
        """Register (or re-register) the device's tools and its device-local MCP tools'
        specs, checked as the cloud will read them."""
        bad = [t for t in tools if not re.fullmatch(TOOL_NAME_PATTERN, t)]
        if bad:
            raise InvalidDeviceRequest(f"invalid tool name {bad[0][:64]!r}")
        try:
            device_mcp_tools(specs)
        except McpListingError as err:
            raise InvalidDeviceRequest(str(err)) from None
        async with agent_state(self._sessions, tenant, write=True) as st:
            await st.devices.register(device, sorted(set(tools)), specs)

    async def check_in(self, tenant: str, device: str) -> None:
        """Before a poll: its tenant is not frozen (a call already taken may still
        complete), and the device is registered (its heartbeat is bumped)."""
        async with agent_state(self._sessions, tenant) as st:
            if await st.controls.frozen():
                raise TenantFrozen(tenant)
        async with agent_state(self._sessions, tenant, write=True) as st:
            if not await st.devices.heartbeat(device):
                raise NotRegistered()

    async def next_call(
        self, tenant: str, device: str, wait_seconds: float, *, until: asyncio.Event
    ) -> Offer | None:
        """Lease this device's next call, waiting up to `wait_seconds` for one; PollEnded
        once `until` is set (the caller's key ended)."""
        await self._wakes.ensure_started()
        with self._wakes.waiting(tenant, device) as woken:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait_seconds
            while True:
                if until.is_set():
                    raise PollEnded()
                woken.clear()
                found = await self._claim(tenant, device)
                if found is not None:
                    return found
                left = deadline - loop.time()
                if left <= 0:
                    return None
                # Woken by a call for this device, or by `until` (checked above).
                wakes_up = [
                    asyncio.ensure_future(woken.wait()),
                    asyncio.ensure_future(until.wait()),
                ]
                try:
                    await asyncio.wait(
                        wakes_up,
                        timeout=min(left, RECHECK_SECONDS),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    for waiter in wakes_up:
                        waiter.cancel()

    async def _claim(self, tenant: str, device: str) -> Offer | None:
        async with agent_state(self._sessions, tenant, write=True) as st:
            call = await st.device_calls(device).claim(self._lease)
            if call is None:
                return None
            effective = await st.calls.effective(call.session_id, call.tool_call_id)
            if effective is None:
                # offer_device_call checked the call first: this rolls the claim back and
                # offers nothing (the gateway answers 500).
                raise LookupError(f"device call {call.id}: no tool call {call.tool_call_id}")
            session = await st.sessions.get(call.session_id)
        return Offer(
            call_id=str(call.id),
            idempotency_key=call.idempotency_key,
            tool=call.tool_name or effective.tool_name[:128],
            arguments=effective.arguments,
            agent=session.agent_definition,
            step=call.step,
            offered_before=call.offers > 1,
            lease=call.offers,
            lease_seconds=self._lease_seconds,
            upload=await upload_target(self._store, call, self._lease),
        )

    async def _held(self, call: DeviceCallRow, lease: int | None) -> timedelta:
        """What is left of the current lease on `call` (the one it was read under, or
        `lease` when the device names it); NotLeased when there is none."""
        if lease is not None and lease != call.offers:
            raise NotLeased()
        async with agent_state(self._sessions, call.tenant_id) as st:
            left = await st.device_calls(call.device_id).lease_left(call.id, call.offers)
        if left is None:
            raise NotLeased()
        return left

    async def bound_upload(
        self, tenant: str, device: str, raw_id: str, sha256: str, lease: int | None = None
    ) -> UploadTarget:
        """An upload target for this device's call bound to the bytes of `sha256`."""
        async with agent_state(self._sessions, tenant) as st:
            call = await st.device_calls(device).get(_call_id(raw_id))
        if call is None:
            raise NoSuchCall()
        if call.state == DONE:
            raise AlreadyCommitted()
        return await upload_target(self._store, call, await self._held(call, lease), sha256)

    async def renew(self, tenant: str, device: str, raw_id: str, lease: int | None = None) -> None:
        """The device is still at it: renew its lease (`lease`, when named) and heartbeat
        the Temporal activity."""
        call_id = _call_id(raw_id)
        async with agent_state(self._sessions, tenant, write=True) as st:
            calls = st.device_calls(device)
            call = await calls.extend(call_id, self._lease, held=lease)
            if call is None and await calls.get(call_id) is None:
                raise NoSuchCall()
        if call is None:
            raise NotLeased()  # released, offered again, or ran out: never revived
        try:
            await self._client.get_async_activity_handle(task_token=call.task_token).heartbeat()
        except RPCError as err:
            # The attempt timed out already; a newer one hands the call over again.
            logger.info("heartbeat of device call %s refused: %s", call.id, err.status.name)

    async def complete(
        self, tenant: str, device: str, raw_id: str, done: Completion
    ) -> tuple[str, bool]:
        """Verify and commit the device's result; (call id, whether it was committed
        before)."""
        call_id = _call_id(raw_id)
        if (done.result is None) == (done.error is None):
            raise InvalidDeviceRequest("send exactly one of result and error")
        async with agent_state(self._sessions, tenant) as st:
            call = await st.device_calls(device).get(call_id)
        if call is None:
            raise NoSuchCall()
        if call.state == DONE:
            # Committed before; the activity may not have heard (a failed completion): tell it.
            await self._complete_again(call)
            return str(call.id), True
        # Only under the current lease: a device whose lease was released or ran out (the
        # call offered again) has nothing to complete.
        await self._held(call, done.lease)
        artifact = await self._verified_upload(call, done) if done.result is not None else None
        async with agent_state(self._sessions, tenant, write=True) as st:
            calls = st.device_calls(device)
            # Checks the lease against the database's clock and takes the call in one
            # statement (the newest attempt's token, held): a lease that ran out meanwhile,
            # or another gateway's completion, cannot slip in between.
            locked = await calls.finish(call_id, call.offers)
            already = False
            if locked is None:
                locked = await calls.get(call_id, lock=True)
                if locked is None:
                    raise NoSuchCall()
                if locked.state != DONE:
                    raise NotLeased()  # lost since the check above: nothing committed
                already = True  # another completion committed it meanwhile
            item = await commit_tool_result(
                st.db, tenant, _tool_result(locked, done, artifact), store=self._store
            )
        await forget_upload(self._store, call)
        if not already:
            await self._complete_activity(locked, item)
        return str(call.id), already

    async def _verified_upload(self, call: DeviceCallRow, done: Completion) -> VerifiedArtifact:
        """The uploaded bytes, stored content-addressed, if they are what the device says;
        else the call is offered again and the device told why (ResultRefused)."""
        assert done.result is not None  # complete() checked it
        try:
            data = await read_back(self._store, call, done.result)
        except Mismatch as err:
            await self._refuse(call)
            raise ResultRefused(err.why) from None
        # Verified in the store (content-addressed) before anything refers to it.
        ref = await self._store.put(call.tenant_id, data, done.result.content_type)
        return VerifiedArtifact(ref, data)

    async def _refuse(self, call: DeviceCallRow) -> None:
        """Commit nothing; hand the call out again (to this device's next poll)."""
        async with agent_state(self._sessions, call.tenant_id, write=True) as st:
            await st.device_calls(call.device_id).release(call.id, call.offers)
        await forget_upload(self._store, call)

    async def _complete_again(self, call: DeviceCallRow) -> None:
        async with agent_state(self._sessions, call.tenant_id) as st:
            item = await st.items.by_key(call.idempotency_key)
        if item is not None:
            await self._complete_activity(call, item)

    async def _complete_activity(self, call: DeviceCallRow, item: ItemRow) -> None:
        handle = self._client.get_async_activity_handle(task_token=call.task_token)
        try:
            await handle.complete(outcome_of(item, call.tenant_id, self._store.prefix))
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            # That attempt timed out, or was completed already; a retry finds the result
            # committed under the key.
            logger.info("device call %s: its attempt was gone; the retry reads the result", call.id)


def _tool_result(
    call: DeviceCallRow, done: Completion, artifact: VerifiedArtifact | None
) -> ToolResult:
    extra: dict[str, Any] = {}
    if done.effect is not None:
        extra["effect"] = done.effect
    if call.rerun:
        extra["rerun"] = call.rerun
    error_type, error = None, ""
    if done.error is not None:
        error_type, error = done.error.type, done.error.message
        if done.effect == EffectState.IN_DOUBT:
            error_type = EFFECT_IN_DOUBT
    return ToolResult(
        session_id=call.session_id,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        step=call.step,
        idempotency_key=call.idempotency_key,
        artifact=artifact,
        error_type=error_type,
        error=error,
        extra=extra,
    )
