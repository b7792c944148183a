"""fetch_url: a bounded HTTP GET whose body goes to object storage, not the conversation.

The URL comes from the model, so it is untrusted: every hop (the first and each redirect,
followed here one by one) is resolved once, refused if any address is internal (see
fetch_address), and connected to at exactly the address that was checked. The Host header
and TLS (SNI and certificate check) stay on the URL's host name.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from durable_agents.activities.tools.base import (
    ToolContext,
    ToolError,
    ToolFn,
    ToolOutput,
    TransientToolError,
)
from durable_agents.activities.tools.fetch_address import checked_address
from durable_agents.activities.tools.fetch_policy import FetchPolicy
from durable_agents.activities.tools.internal_addresses import IPAddress, ip_literal
from durable_agents.activities.tools.typed import tool

MAX_REDIRECTS = 5
USER_AGENT = "durable-agents/0.1 (+fetch_url tool)"

_ALLOWED_SCHEMES = frozenset({"http", "https"})
# 4xx that mean "try again later" rather than "this request is wrong".
_TRANSIENT_4XX = frozenset({408, 429})
_MAX_SHOWN = 200


def _shown(url: str | httpx.URL) -> str:
    text = str(url)
    return repr(text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "...")


def _checked_url(url: httpx.URL, what: str) -> httpx.URL:
    """`url` if it may be fetched at all; `what` names it in the error ("'x'", "..., which")."""
    if url.scheme not in _ALLOWED_SCHEMES:
        raise ToolError(
            "UnsupportedScheme", f"{what} is not an http(s) URL; only those are fetched"
        )
    if not url.host:
        raise ToolError("InvalidUrl", f"{what} has no host")
    if url.userinfo:
        raise ToolError("InvalidUrl", f"{what} has a user name or password; those are not sent")
    return url


def _parse_url(raw: str) -> httpx.URL:
    if not raw.strip():
        raise ToolError("InvalidArguments", "argument 'url' must not be empty")
    try:
        url = httpx.URL(raw.strip())
    except httpx.InvalidURL as exc:
        raise ToolError("InvalidUrl", f"{_shown(raw)} is not a valid URL") from exc
    return _checked_url(url, _shown(raw))


def _redirect_target(url: httpx.URL, response: httpx.Response) -> httpx.URL:
    try:
        target = url.join(response.headers["Location"])
    except httpx.InvalidURL as exc:
        raise ToolError("InvalidUrl", f"{_shown(url)} redirected to an invalid URL") from exc
    # The server chose the target: show it without any credentials it carries.
    shown = f"{_shown(url)} redirected to {_shown(target.copy_with(userinfo=b''))}, which"
    return _checked_url(target.copy_with(fragment=None), shown)


def _check_status(response: httpx.Response, url: httpx.URL) -> None:
    status = response.status_code
    if status >= 500 or status in _TRANSIENT_4XX:
        raise TransientToolError(f"fetch_url: HTTP status {status}")
    if status >= 400:
        raise ToolError("HttpError", f"GET {_shown(url)} returned HTTP status {status}")


def _too_large(url: httpx.URL, limit: int) -> ToolError:
    return ToolError(
        "ResponseTooLarge", f"the response from {_shown(url)} is larger than the {limit} byte limit"
    )


def _tls_context() -> ssl.SSLContext:
    """The CA bundle an operator names in SSL_CERT_FILE / SSL_CERT_DIR, else certifi's."""
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context_for(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    # Built once, not per hop: loading a CA bundle takes ~50 ms.
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile or None, capath=capath or None)
    return httpx.create_ssl_context()


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    link: BaseException | None = exc
    for _ in range(8):  # httpx -> httpcore -> ssl is three links; bounded against cycles
        if link is None or isinstance(link, kind):
            return link is not None
        link = link.__cause__ or link.__context__
    return False


@dataclass
class _Progress:
    """Whether the current hop reached its server: a timeout before that may heal on retry,
    one after it means the server is too slow, and the model should be told."""

    connected: bool = False

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            self.connected = True


async def _read(response: httpx.Response, url: httpx.URL, limit: int) -> ToolOutput:
    _check_status(response, url)
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(url, limit)
    body = bytearray()
    # aiter_bytes yields decoded bytes, so the limit also stops decompression bombs.
    async for chunk in response.aiter_bytes():
        body.extend(chunk)
        if len(body) > limit:
            raise _too_large(url, limit)
    content_type = response.headers.get("content-type", "application/octet-stream")
    return ToolOutput(content=bytes(body), content_type=content_type)


def _pinned_request(
    client: httpx.AsyncClient, url: httpx.URL, host: str, ip: IPAddress, progress: _Progress
) -> httpx.Request:
    """A GET to `ip` that still names `host`: Host header, TLS SNI and certificate check."""
    extensions: dict[str, Any] = {"trace": progress.trace}
    if ip_literal(host) is None:
        extensions["sni_hostname"] = host
    return client.build_request(
        "GET",
        url.copy_with(host=str(ip)),
        headers={"Host": url.netloc.decode("ascii"), "User-Agent": USER_AGENT},
        extensions=extensions,
    )


async def _hop(url: httpx.URL, policy: FetchPolicy, progress: _Progress) -> ToolOutput | httpx.URL:
    """One request: the output, or the next URL if the server redirected."""
    host = url.raw_host.decode("ascii")
    ip = await checked_address(policy, host, _shown(url))
    progress.connected = False
    # An explicit transport: no proxy from the environment may stand between us and `ip`.
    # A client per hop: a pooled connection made for one host name must not carry another's.
    async with httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(verify=_tls_context()),
        timeout=httpx.Timeout(policy.timeout_seconds),
    ) as client:
        request = _pinned_request(client, url, host, ip, progress)
        response = await client.send(request, stream=True)
        try:
            if response.is_redirect:
                return _redirect_target(url, response)
            return await _read(response, url, policy.max_bytes)
        finally:
            await response.aclose()


async def _follow(start: httpx.URL, policy: FetchPolicy, progress: _Progress) -> ToolOutput:
    url = start
    for _ in range(MAX_REDIRECTS + 1):
        outcome = await _hop(url, policy, progress)
        if isinstance(outcome, ToolOutput):
            return outcome
        url = outcome
    raise ToolError(
        "TooManyRedirects", f"{_shown(start)} redirected more than {MAX_REDIRECTS} times"
    )


@tool(
    effect="read_only",
    name="fetch_url",
    description=(
        f"HTTP GET an http(s) URL (following up to {MAX_REDIRECTS} redirects) and return "
        "the response body with its content type. Large responses are rejected."
    ),
)
async def fetch_url_tool(ctx: ToolContext, url: str) -> ToolOutput:
    """GET an http(s) URL on the public internet, following up to MAX_REDIRECTS redirects.

    Internal addresses are refused (ToolError "AddressDenied") unless `ctx.fetch.allow`
    allows them. The body is capped at `ctx.fetch.max_bytes` (ToolError "ResponseTooLarge")
    and the whole fetch, redirects included, at `ctx.fetch.timeout_seconds` (ToolError
    "FetchTooSlow" once connected). 4xx raise ToolError("HttpError"); 5xx, 408/429,
    connection failures and timeouts before connecting raise TransientToolError.

    Args:
        url: Absolute http:// or https:// URL.
    """
    return await _fetch(ctx, _parse_url(url))


fetch_url: ToolFn = fetch_url_tool.fn


async def _fetch(ctx: ToolContext, url: httpx.URL) -> ToolOutput:
    policy = ctx.fetch
    progress = _Progress()
    try:
        async with asyncio.timeout(policy.timeout_seconds):
            return await _follow(url, policy, progress)
    except (TimeoutError, httpx.TimeoutException) as exc:
        if not progress.connected or isinstance(exc, httpx.ConnectTimeout):
            raise TransientToolError("fetch_url: timed out before connecting") from None
        # The server is there but too slow: retrying would hold the call for minutes more.
        raise ToolError(
            "FetchTooSlow",
            f"fetch_url: {_shown(url)} did not finish within {policy.timeout_seconds:g} seconds",
        ) from exc
    except httpx.InvalidURL as exc:
        raise ToolError("InvalidUrl", f"{_shown(url)} led to an invalid URL") from exc
    except httpx.DecodingError as exc:
        # A corrupt Content-Encoding body will be just as corrupt on retry.
        raise ToolError(
            "InvalidResponse", f"the response from {_shown(url)} could not be decoded"
        ) from exc
    except httpx.ConnectError as exc:
        if _caused_by(exc, ssl.SSLCertVerificationError):
            # The same certificate will fail the same check on every retry.
            raise ToolError(
                "TlsCertificateInvalid",
                f"fetch_url: the TLS certificate of {_shown(url)} could not be verified",
            ) from exc
        raise TransientToolError(f"fetch_url: request failed ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise TransientToolError(f"fetch_url: request failed ({type(exc).__name__})") from None
