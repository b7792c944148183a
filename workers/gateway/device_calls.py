"""Device calls through the gateway: hand a device its next call, renew its lease, and
accept its result only once the uploaded object was read back and matched.

Upload -> verify -> commit holds as on the cloud: the device PUTs its result bytes to a
presigned URL bound to this call's staging key; on completion the gateway reads that object,
checks its size and sha256 against what the device claims, stores it content-addressed
(ArtifactStore.put verifies again), commits the tool_result under the call's idempotency key
(commit_tool_result, once per key) and only then completes the Temporal activity with the
task token it kept. A mismatch commits nothing and offers the call again. The device never
holds a database, S3 or Temporal credential.

Nothing here is per process: calls, leases and results live in PostgreSQL, so a device may
poll one gateway, renew through a second and complete through a third. Two completions of
one call (a retry, or two gateways) commit once: the row is locked, and the result is
upserted under the call's idempotency key.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import uuid
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.tools.effects import EFFECT_IN_DOUBT
from durable_agents.activities.tools.outcomes import outcome_of
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.api_keys import Principal
from durable_agents.storage.artifact_streams import status as s3_status
from durable_agents.storage.device_calls import DONE, STAGING_DIR, DeviceCallRepository
from durable_agents.storage.device_models import DeviceCallRow
from durable_agents.storage.devices import DeviceRepository
from durable_agents.storage.items import ItemRepository
from durable_agents.storage.models import ItemRow
from durable_agents.storage.tool_effects import EffectState
from durable_agents.storage.tool_results import ToolResult, VerifiedArtifact, commit_tool_result
from durable_agents.workers.gateway.auth import unauthorized
from durable_agents.workers.gateway.context import Gateway
from durable_agents.workers.gateway.device_models import Completion, OfferedCall, UploadTarget
from durable_agents.workers.gateway.device_wakes import DeviceWakes
from durable_agents.workers.gateway.errors import ApiError
from durable_agents.workers.gateway.key_holds import POLL

logger = logging.getLogger(__name__)

# An upload URL lives as long as the lease it was given under has left, within these.
UPLOAD_MIN_SECONDS, UPLOAD_MAX_SECONDS = 1, 900
# What the gateway reads back to verify, in memory: a larger result is refused.
MAX_RESULT_BYTES = 64 * 1024 * 1024
# How often a waiting poll looks at the table anyway: a lease that ran out notifies
# nobody, and a lost LISTEN connection misses wake-ups (bench/device_dispatch.py: each
# waiting poll costs one indexed read per period).
RECHECK_SECONDS = 5.0


def staging_key(prefix: str, call: DeviceCallRow) -> str:
    """Where the device uploads this call's result under its current lease: one key per
    call and lease, under its tenant (an upload made under an older lease is never read;
    durable_agents.storage.gc collects what was left behind)."""
    return f"{prefix}/{call.tenant_id}/{STAGING_DIR}/{call.id}/{call.offers}"


def _lease(gateway: Gateway) -> timedelta:
    # A device renews its lease well within this; a device gone this long is taken as
    # gone (the call's Temporal heartbeat timeout is 30 s, the default lease).
    return timedelta(seconds=gateway.settings.gateway.device_lease_seconds)


def _not_leased() -> ApiError:
    return ApiError(
        409, "not_leased", "this device holds no current lease on that call; poll for it again"
    )


async def _held(gateway: Gateway, call: DeviceCallRow, lease: int | None) -> timedelta:
    """What is left of the current lease on `call` (the one it was read under, or `lease`
    when the device names it); 409 when there is none."""
    if lease is not None and lease != call.offers:
        raise _not_leased()
    async with gateway.resources.sessions() as db:
        repo = DeviceCallRepository(db, call.tenant_id, call.device_id)
        left = await repo.lease_left(call.id, call.offers)
    if left is None:
        raise _not_leased()
    return left


def _call_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise _no_such_call() from None


def _no_such_call() -> ApiError:
    # Another device's call and a missing one look the same.
    return ApiError(404, "not_found", "no such call for this device")


def device_of(principal: Principal) -> str:
    """The device a device key speaks for."""
    if principal.device_id is None:  # device_principal let only device keys through
        raise ApiError(403, "forbidden", "the device routes need a device key")
    return principal.device_id


async def next_call(
    gateway: Gateway,
    wakes: DeviceWakes,
    principal: Principal,
    wait_seconds: float,
) -> OfferedCall | None:
    """Lease this device's next call, waiting up to `wait_seconds` for one."""
    tenant, device = principal.tenant_id, device_of(principal)
    async with gateway.resources.sessions() as db, db.begin():
        if not await DeviceRepository(db, tenant).heartbeat(device):
            raise ApiError(409, "not_registered", "register the device first (POST /v1/device)")
    hold = gateway.holds.acquire(principal.key_id, POLL)  # 429 past the key's cap
    try:
        await wakes.ensure_started()
        with wakes.waiting(tenant, device) as woken:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait_seconds
            while True:
                if hold.ended.is_set():  # the key was revoked or expired while it waited
                    raise unauthorized()
                woken.clear()
                found = await _claim(gateway, tenant, device)
                if found is not None:
                    return found
                left = deadline - loop.time()
                if left <= 0:
                    return None
                # Woken by a call for this device, or by its key ending (checked above).
                wakes_up = [
                    asyncio.ensure_future(woken.wait()),
                    asyncio.ensure_future(hold.ended.wait()),
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
    finally:
        hold.release()


async def _claim(gateway: Gateway, tenant: str, device: str) -> OfferedCall | None:
    async with gateway.resources.sessions() as db, db.begin():
        call = await DeviceCallRepository(db, tenant, device).claim(_lease(gateway))
        if call is None:
            return None
        st = AgentState(db, tenant)
        effective = await st.calls.effective(call.session_id, call.tool_call_id)
        if effective is None:
            # offer_device_call checked the call first: this rolls the claim back, offers
            # nothing, and the gateway answers 500.
            raise LookupError(f"device call {call.id}: no tool call {call.tool_call_id}")
        session = await st.sessions.get(call.session_id)
    return OfferedCall(
        call_id=str(call.id),
        idempotency_key=call.idempotency_key,
        tool=call.tool_name or effective.tool_name[:128],
        arguments=effective.arguments,
        agent=session.agent_definition,
        step=call.step,
        offered_before=call.offers > 1,
        lease=call.offers,
        lease_seconds=gateway.settings.gateway.device_lease_seconds,
        upload=await _upload_target(gateway, call, _lease(gateway)),
    )


async def _upload_target(
    gateway: Gateway, call: DeviceCallRow, lease_left: timedelta, sha256: str | None = None
) -> UploadTarget:
    """A presigned PUT for the call's staging key under its current lease, valid no longer
    than that lease has left; with `sha256`, bound to those bytes too (SeaweedFS and S3
    refuse a body whose sha256 differs: 400 BadDigest)."""
    expires = int(lease_left.total_seconds())
    expires = max(UPLOAD_MIN_SECONDS, min(UPLOAD_MAX_SECONDS, expires))
    store = gateway.resources.store
    params = {"Bucket": store.bucket, "Key": staging_key(store.prefix, call)}
    headers: dict[str, str] = {}
    if sha256 is not None:
        checksum = base64.b64encode(bytes.fromhex(sha256)).decode()
        params["ChecksumSHA256"] = checksum
        headers["x-amz-checksum-sha256"] = checksum
    url: str = await store.client.generate_presigned_url(
        "put_object", Params=params, ExpiresIn=expires, HttpMethod="PUT"
    )
    return UploadTarget(url=url, expires_in=expires, headers=headers)


async def bound_upload(
    gateway: Gateway, principal: Principal, raw_id: str, sha256: str, lease: int | None = None
) -> UploadTarget:
    """An upload target for this device's call bound to the bytes of `sha256`."""
    tenant, device = principal.tenant_id, device_of(principal)
    async with gateway.resources.sessions() as db:
        call = await DeviceCallRepository(db, tenant, device).get(_call_id(raw_id))
    if call is None:
        raise _no_such_call()
    if call.state == DONE:
        raise ApiError(409, "already_committed", "this call's result is committed already")
    return await _upload_target(gateway, call, await _held(gateway, call, lease), sha256)


async def renew(
    gateway: Gateway, principal: Principal, raw_id: str, lease: int | None = None
) -> None:
    """The device is still at it: renew its lease (`lease`, when named) and heartbeat the
    Temporal activity."""
    tenant, device = principal.tenant_id, device_of(principal)
    call_id = _call_id(raw_id)
    async with gateway.resources.sessions() as db, db.begin():
        repo = DeviceCallRepository(db, tenant, device)
        call = await repo.extend(call_id, _lease(gateway), held=lease)
        if call is None and await repo.get(call_id) is None:
            raise _no_such_call()
    if call is None:
        raise _not_leased()  # released, offered again, or ran out: never revived
    try:
        await gateway.client.get_async_activity_handle(task_token=call.task_token).heartbeat()
    except RPCError as err:
        # The attempt timed out already; a newer one hands the call over again.
        logger.info("heartbeat of device call %s refused: %s", call.id, err.status.name)


async def complete(
    gateway: Gateway, principal: Principal, raw_id: str, body: Completion
) -> tuple[str, bool]:
    """Verify and commit the device's result; (call id, whether it was committed before)."""
    tenant, device = principal.tenant_id, device_of(principal)
    call_id = _call_id(raw_id)
    if (body.result is None) == (body.error is None):
        raise ApiError(422, "invalid_request", "send exactly one of result and error")
    async with gateway.resources.sessions() as db:
        call = await DeviceCallRepository(db, tenant, device).get(call_id)
    if call is None:
        raise _no_such_call()
    if call.state == DONE:
        # Committed before; the activity may not have heard (a failed completion): tell it.
        await _complete_again(gateway, call)
        return str(call.id), True
    # Only under the current lease: a device whose lease was released or ran out (the
    # call offered again) has nothing to complete.
    await _held(gateway, call, body.lease)
    artifact = await _verified_upload(gateway, call, body) if body.result is not None else None
    async with gateway.resources.sessions() as db, db.begin():
        repo = DeviceCallRepository(db, tenant, device)
        # Checks the lease against the database's clock and takes the call in one statement
        # (the newest attempt's token, held): a lease that ran out meanwhile, or another
        # gateway's completion, cannot slip in between.
        locked = await repo.finish(call_id, call.offers)
        already = False
        if locked is None:
            locked = await repo.get(call_id, lock=True)
            if locked is None:
                raise _no_such_call()
            if locked.state != DONE:
                raise _not_leased()  # lost since the check above: nothing committed
            already = True  # another completion committed it meanwhile
        item = await commit_tool_result(
            db, tenant, _tool_result(locked, body, artifact), store=gateway.resources.store
        )
    await _forget_upload(gateway, call)
    if not already:
        await _complete_activity(gateway, locked, item)
    return str(call.id), already


async def _verified_upload(
    gateway: Gateway, call: DeviceCallRow, body: Completion
) -> VerifiedArtifact:
    """The uploaded bytes, stored content-addressed, if they are what the device says;
    else the call is offered again and the device told why (422)."""
    claimed = body.result
    assert claimed is not None  # complete() checked it
    store = gateway.resources.store
    key = staging_key(store.prefix, call)
    if claimed.size_bytes > MAX_RESULT_BYTES:
        await _refuse(gateway, call, f"a result is at most {MAX_RESULT_BYTES} bytes")
    try:
        head = await store.client.head_object(Bucket=store.bucket, Key=key)
        if head.get("ContentLength") != claimed.size_bytes:
            await _refuse(gateway, call, "the uploaded object's size is not the size claimed")
        data = b""
        if claimed.size_bytes:
            # One byte past the claim: an object replaced since the HEAD cannot make this
            # read more than MAX_RESULT_BYTES + 1, and a longer one fails the size check.
            obj = await store.client.get_object(
                Bucket=store.bucket, Key=key, Range=f"bytes=0-{claimed.size_bytes}"
            )
            async with obj["Body"] as stream:
                data = await stream.read()
    except ClientError as err:
        if s3_status(err) != 404:
            raise
        await _refuse(gateway, call, "nothing was uploaded for this call")
    if len(data) != claimed.size_bytes or hashlib.sha256(data).hexdigest() != claimed.sha256:
        await _refuse(gateway, call, "the uploaded object does not match the sha256 and size")
    # Verified in the store (content-addressed) before anything refers to it.
    ref = await store.put(call.tenant_id, data, claimed.content_type)
    return VerifiedArtifact(ref, data)


async def _refuse(gateway: Gateway, call: DeviceCallRow, why: str) -> Any:
    """Commit nothing; hand the call out again (to this device's next poll)."""
    async with gateway.resources.sessions() as db, db.begin():
        await DeviceCallRepository(db, call.tenant_id, call.device_id).release(call.id, call.offers)
    await _forget_upload(gateway, call)
    raise ApiError(422, "result_refused", f"{why}; the call is offered again")


def _tool_result(
    call: DeviceCallRow, body: Completion, artifact: VerifiedArtifact | None
) -> ToolResult:
    extra: dict[str, Any] = {}
    if body.effect is not None:
        extra["effect"] = body.effect
    if call.rerun:
        extra["rerun"] = call.rerun
    error_type, error = None, ""
    if body.error is not None:
        error_type, error = body.error.type, body.error.message
        if body.effect == EffectState.IN_DOUBT:
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


async def _forget_upload(gateway: Gateway, call: DeviceCallRow) -> None:
    """The staging object is not needed once verified or refused (best-effort)."""
    store = gateway.resources.store
    try:
        await store.client.delete_object(Bucket=store.bucket, Key=staging_key(store.prefix, call))
    except ClientError:
        logger.warning("staging object of device call %s not deleted", call.id)


async def _complete_again(gateway: Gateway, call: DeviceCallRow) -> None:
    async with gateway.resources.sessions() as db:
        item = await ItemRepository(db, call.tenant_id).by_key(call.idempotency_key)
    if item is not None:
        await _complete_activity(gateway, call, item)


async def _complete_activity(gateway: Gateway, call: DeviceCallRow, item: ItemRow) -> None:
    handle = gateway.client.get_async_activity_handle(task_token=call.task_token)
    try:
        await handle.complete(outcome_of(item, call.tenant_id, gateway.resources.store.prefix))
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        # That attempt timed out, or was completed already; a retry finds the result
        # committed under the key.
        logger.info("device call %s: its attempt was gone; the retry reads the result", call.id)
