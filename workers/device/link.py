"""The device process that holds a device key and nothing else: it reaches the cloud only
through the gateway (AGENT_GATEWAY_URL), long-polls for its own calls, runs each on its
workspace (built-ins and its device-local MCP servers), uploads the result bytes to the
call's presigned PUT and reports size, sha256 and content type. No database, S3 or
Temporal setting is read or needed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import httpx
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from durable_agents.workers.device.calls import LocalResult, LocalTools
from durable_agents.workers.device.url_logs import drop_url_queries

logger = logging.getLogger(__name__)

POLL_WAIT_SECONDS = 20.0
# Well within the gateway's default 30 s lease (a shorter lease renews at a third of it):
# two beats may be lost before the call is re-offered.
LEASE_RENEW_SECONDS = 8.0
_BACKOFF_MAX_SECONDS = 10.0


class DeviceLinkSettings(BaseSettings):
    """AGENT_GATEWAY_URL and AGENT_DEVICE_KEY: all a device needs."""

    model_config = SettingsConfigDict(env_prefix="AGENT_", extra="ignore")

    gateway_url: str
    device_key: SecretStr


class GatewayRefused(ValueError):
    """The gateway answered with an error the device cannot fix by retrying (a ValueError:
    agentctl reports it as one `error: ...` line)."""


async def run_device_link(
    link: DeviceLinkSettings,
    tools: LocalTools,
    tool_names: list[str],
    tool_specs: list[dict[str, Any]] | None,
    stop: asyncio.Event,
) -> None:
    """Register, then serve calls until `stop` is set. Each call runs in a task of its own,
    so a slow tool does not keep the next call waiting."""
    drop_url_queries()  # before the first upload: a presigned URL is never logged
    headers = {"Authorization": f"Bearer {link.device_key.get_secret_value()}"}
    timeout = httpx.Timeout(30.0, read=POLL_WAIT_SECONDS + 30.0)
    async with httpx.AsyncClient(
        base_url=link.gateway_url.rstrip("/"), headers=headers, timeout=timeout
    ) as http:
        identity = await _register(http, {"tools": tool_names, "tool_specs": tool_specs})
        tenant, device = identity["tenant_id"], identity["device_id"]
        logger.info(
            "device link for %s serving %s via %s", device, tools.workspace, link.gateway_url
        )
        running: set[asyncio.Task[None]] = set()
        backoff = 0.5
        stopping = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                poll = asyncio.create_task(
                    http.post("/v1/device/calls/next", params={"wait": POLL_WAIT_SECONDS})
                )
                await asyncio.wait({poll, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not poll.done():
                    poll.cancel()
                    break
                try:
                    answer = poll.result()
                except httpx.TransportError as err:
                    logger.warning("gateway unreachable (%s); retrying", type(err).__name__)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _BACKOFF_MAX_SECONDS)
                    continue
                if answer.status_code == 204:
                    backoff = 0.5
                    continue
                if answer.status_code != 200:
                    if answer.status_code in (401, 403):
                        raise GatewayRefused(f"the gateway refused this key: {_error_of(answer)}")
                    logger.warning("poll answered %s; retrying", answer.status_code)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _BACKOFF_MAX_SECONDS)
                    continue
                backoff = 0.5
                task = asyncio.create_task(_serve(http, tools, tenant, answer.json()))
                running.add(task)
                task.add_done_callback(running.discard)
        finally:
            stopping.cancel()
            for task in list(running):
                task.cancel()
            await asyncio.gather(*running, stopping, return_exceptions=True)


async def _register(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """Register the device's tools; a gateway not reachable yet (a laptop waking up
    offline) is waited for, a refusal is final."""
    backoff = 0.5
    while True:
        try:
            answer = await http.post("/v1/device", json=body)
        except httpx.TransportError as err:
            logger.warning("gateway unreachable (%s); retrying", type(err).__name__)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_SECONDS)
            continue
        if answer.status_code != 200:
            raise GatewayRefused(f"registration refused: {_error_of(answer)}")
        identity: dict[str, Any] = answer.json()
        return identity


async def _serve(
    http: httpx.AsyncClient, tools: LocalTools, tenant: str, call: dict[str, Any]
) -> None:
    try:
        await _serve_one(http, tools, tenant, call)
    except (httpx.HTTPError, GatewayRefused, KeyError, TypeError) as err:
        # Not completed: the lease runs out and the gateway offers the call again.
        logger.warning("call %s not completed: %s", call.get("call_id"), err)


async def _serve_one(
    http: httpx.AsyncClient, tools: LocalTools, tenant: str, call: dict[str, Any]
) -> None:
    call_id = call["call_id"]
    work = asyncio.create_task(_run_and_upload(http, tools, tenant, call))
    renew = asyncio.create_task(_renew(http, call_id, call.get("lease"), _renew_every(call)))
    try:
        await asyncio.wait({work, renew}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work, renew):
            if not task.done():
                task.cancel()
        await asyncio.gather(work, renew, return_exceptions=True)
    if renew.done() and not renew.cancelled():
        # The gateway says the lease is gone (it ran out, or the call was offered again):
        # the tool is stopped and nothing is sent. The next poll may hand the call out
        # again, as a call offered before (an effectful tool reconciles first).
        logger.warning("call %s: lease lost; back to polling", call_id)
        return
    body = work.result()  # the tool's or the upload's failure, if it failed
    answer = await http.post(f"/v1/device/calls/{call_id}/complete", json=body)
    if answer.status_code != 200:
        # Refused (e.g. the upload did not match): the gateway offers the call again.
        logger.warning("completion of call %s refused: %s", call_id, _error_of(answer))
    else:
        logger.info("call %s (%s) %s", call_id, call["tool"], answer.json()["status"])


async def _run_and_upload(
    http: httpx.AsyncClient, tools: LocalTools, tenant: str, call: dict[str, Any]
) -> dict[str, Any]:
    result = await tools.run(
        tool_name=call["tool"],
        arguments=call["arguments"],
        agent=call["agent"],
        idempotency_key=call["idempotency_key"],
        tenant_id=tenant,
        offered_before=call["offered_before"],
    )
    return await _upload(http, call, result)


async def _upload(
    http: httpx.AsyncClient, call: dict[str, Any], result: LocalResult
) -> dict[str, Any]:
    """The completion body; a result's bytes are PUT to the call's target first."""
    # The lease it ran under, named so that one which since ran out is refused, not taken.
    lease = {"lease": call["lease"]} if "lease" in call else {}
    body: dict[str, Any] = dict(lease)
    if result.effect is not None:
        body["effect"] = result.effect
    if result.output is None:
        body["error"] = {"type": result.error_type or "ToolFailed", "message": result.error[:4000]}
        return body
    content = result.output.content
    sha = hashlib.sha256(content).hexdigest()
    # A target bound to these bytes too (S3 refuses others), for exactly this call.
    bound = await http.post(
        f"/v1/device/calls/{call['call_id']}/upload", json={"sha256": sha, **lease}
    )
    if bound.status_code != 200:
        raise GatewayRefused(f"no upload target: {_error_of(bound)}")
    target = bound.json()
    # The presigned URL is the credential: no Authorization header of ours goes to S3.
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0)) as s3:
        put = await s3.request(
            target["method"], target["url"], content=content, headers=target["headers"]
        )
    if put.status_code >= 300:
        raise GatewayRefused(f"the upload target refused the result ({put.status_code})")
    logger.info(
        "call %s: result uploaded (%d bytes, sha256 %s)", call["call_id"], len(content), sha
    )
    body["result"] = {
        "size_bytes": len(content),
        "sha256": sha,
        "content_type": result.output.content_type,
    }
    return body


def _renew_every(call: dict[str, Any]) -> float:
    """A third of the lease the gateway gave (at most LEASE_RENEW_SECONDS): two beats may
    be lost before it runs out, whatever lease the gateway is configured with."""
    lease_seconds = call.get("lease_seconds")
    if isinstance(lease_seconds, int | float) and lease_seconds > 0:
        return min(LEASE_RENEW_SECONDS, lease_seconds / 3)
    return LEASE_RENEW_SECONDS


async def _renew(http: httpx.AsyncClient, call_id: str, lease: int | None, every: float) -> None:
    """Renew the lease until cancelled; return once the gateway says this device holds it
    no more (409 not_leased, 404): a lease that ran out is never revived."""
    params = {"lease": lease} if lease is not None else {}
    while True:
        await asyncio.sleep(every)
        try:
            answer = await http.post(f"/v1/device/calls/{call_id}/heartbeat", params=params)
        except httpx.HTTPError as err:
            logger.warning(
                "lease renewal of call %s failed (%s); retrying", call_id, type(err).__name__
            )
            continue
        if answer.status_code in (404, 409):
            logger.info("lease renewal of call %s refused: %s", call_id, _error_of(answer))
            return


def _error_of(answer: httpx.Response) -> str:
    try:
        message = answer.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = answer.text[:200]
    return f"{answer.status_code} {str(message)[:300]}"
