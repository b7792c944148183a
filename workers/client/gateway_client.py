"""A client of the gateway for people and devices away from the cloud: it holds a gateway
URL and an API key, nothing else (no database, S3 or Temporal settings).

`follow_session` reads `GET /v1/sessions/{id}/events` and yields each Server-Sent Event until
the session's `end`. A dropped connection (a restarted gateway, a proxy timing out, a lost
network) is reopened with `Last-Event-ID` set to the last item's ordinal, after a bounded
backoff, so every committed item arrives exactly once; refusals (401, 403, 404) end the
follow with a GatewayError whose message is one line for a person.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import httpx

from durable_agents.workers.client.watch.sse import SseDecoder, SseError, SseEvent

URL_ENV = "AGENT_GATEWAY_URL"
KEY_ENV = "AGENT_API_KEY"
# The gateway sends a heartbeat comment every 15 s: a read this much longer means a
# connection that died without a FIN (a sleeping laptop, a NAT drop), so reconnect.
READ_TIMEOUT_SECONDS = 45.0
CONNECT_TIMEOUT_SECONDS = 10.0
# Backoff between reconnects: doubling from the first, never above the cap.
FIRST_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 5.0
# A follow that cannot get back in within this long gives up and says so.
GIVE_UP_SECONDS = 120.0
# Enough of an error body to quote its message, not a whole page.
MAX_ERROR_BODY = 4096


class GatewayError(Exception):
    """The gateway refused the request or could not be reached; says what to check."""


@dataclass(frozen=True)
class Gateway:
    """Where the gateway is and the API key to show it."""

    url: str
    api_key: str

    @classmethod
    def checked(cls, url: str, api_key: str | None) -> Gateway:
        """A usable Gateway, or GatewayError saying which setting is wrong."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GatewayError(f"{URL_ENV} must be an http(s):// URL of the gateway")
        key = (api_key or "").strip()
        if not key:
            raise GatewayError(
                f"set {KEY_ENV} to an API key with the read scope (agentctl keys create); "
                "it is read from the environment only, never from the command line"
            )
        if any(c.isspace() or not c.isprintable() for c in key):
            raise GatewayError(
                f"{KEY_ENV} is not an API key (it holds spaces or control characters)"
            )
        return cls(url.strip().rstrip("/"), key)

    def client(self) -> httpx.AsyncClient:
        """An HTTP client for the gateway, authenticating every request with the key."""
        timeout = httpx.Timeout(CONNECT_TIMEOUT_SECONDS, read=READ_TIMEOUT_SECONDS)
        return httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=timeout,
            # The key goes to this URL only: a redirect elsewhere would carry it along.
            follow_redirects=False,
        )


class _Dropped(Exception):
    """The connection ended before `end`, or the gateway is briefly unavailable."""


async def follow_session(
    gateway: Gateway,
    session_id: str,
    *,
    after: int = 0,
    on_reconnect: Callable[[str], None] | None = None,
    give_up_seconds: float = GIVE_UP_SECONDS,
) -> AsyncGenerator[SseEvent, None]:
    """Each event of the session's stream (`item`, `status`, `delta`, `end`, ...) until
    `end`, across dropped connections; `on_reconnect(why)` hears each reconnect."""
    path = f"/v1/sessions/{quote(session_id, safe='')}/events"
    last_id: str | None = None
    connected_once = False
    backoff = FIRST_BACKOFF_SECONDS
    lost_at: float | None = None  # when the current run of failed reconnects began
    async with gateway.client() as http:
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                async with http.stream(
                    "GET", path, params={"after": after}, headers=headers
                ) as response:
                    await _check(response, gateway, session_id)
                    connected_once = True
                    decoder = SseDecoder()
                    async for chunk in response.aiter_text():
                        for event in decoder.feed(chunk):
                            # Back in only once events flow: a server that answers and
                            # hangs up at once must not be retried without backoff.
                            backoff, lost_at = FIRST_BACKOFF_SECONDS, None
                            if event.event == "item" and event.id:
                                last_id = event.id  # only committed items carry an id
                            yield event
                            if event.event == "end":
                                return
                raise _Dropped("the gateway closed the stream")
            except SseError as err:
                raise GatewayError(f"the gateway at {gateway.url} sent {err}") from None
            except (httpx.TransportError, _Dropped) as err:
                why = _why(err)
            if not connected_once:
                raise GatewayError(
                    f"cannot reach the gateway at {gateway.url} ({why}); is it up? "
                    f"Check {URL_ENV} or --gateway"
                )
            now = time.monotonic()
            lost_at = now if lost_at is None else lost_at
            if now - lost_at > give_up_seconds:
                raise GatewayError(
                    f"lost the gateway at {gateway.url} and could not reconnect within "
                    f"{give_up_seconds:.0f} s ({why})"
                )
            if on_reconnect is not None:
                on_reconnect(why)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


def _why(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


async def _check(response: httpx.Response, gateway: Gateway, session_id: str) -> None:
    """Return if the response is an event stream; else raise what its status means."""
    status = response.status_code
    if status == 200:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            raise GatewayError(
                f"{gateway.url} did not answer with an event stream; is it the gateway?"
            )
        return
    if status in (429, 502, 503, 504):
        # Busy or restarting (a proxy in front says 502-504 while the gateway is away).
        raise _Dropped(f"HTTP {status}")
    message = await _error_message(response)
    if status == 401:
        raise GatewayError(f"the gateway refused the API key (401: {message}); check {KEY_ENV}")
    if status == 403:
        raise GatewayError(f"the API key may not read sessions (403: {message})")
    if status == 404:
        raise GatewayError(f"no session {session_id} for this API key's tenant (404)")
    raise GatewayError(f"the gateway answered HTTP {status}: {message}")


async def _error_message(response: httpx.Response) -> str:
    """The message of the gateway's one error shape, {"error": {"message"}}, if it is one."""
    body = b""
    async for part in response.aiter_bytes():
        body += part
        if len(body) >= MAX_ERROR_BODY:
            break
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return response.reason_phrase or "no reason given"
    flat = " ".join(str(message).split())
    return flat[:200]
