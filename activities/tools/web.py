"""fetch_url: a bounded HTTP GET whose body goes to object storage, not the conversation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from activities.tools.base import ToolContext, ToolError, ToolOutput

MAX_REDIRECTS = 5
USER_AGENT = "durable-agents/0.1 (+fetch_url tool)"

_ALLOWED_SCHEMES = frozenset({"http", "https"})
# 4xx that mean "try again later" rather than "this request is wrong".
_TRANSIENT_4XX = frozenset({408, 429})
_MAX_SHOWN = 200


class TransientToolError(Exception):
    """A failure worth retrying (5xx, connection trouble, timeouts).

    Deliberately not a ToolError: the activity layer lets it propagate so Temporal retries.
    """


def _shown(url: str) -> str:
    return repr(url if len(url) <= _MAX_SHOWN else url[:_MAX_SHOWN] + "...")


def _parse_url(args: dict[str, Any]) -> httpx.URL:
    if "_raw" in args:
        raise ToolError(
            "InvalidArguments", "the tool arguments were not valid JSON; send a JSON object"
        )
    raw = args.get("url")
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("InvalidArguments", "argument 'url' is required and must be a string")
    try:
        url = httpx.URL(raw.strip())
    except httpx.InvalidURL as exc:
        raise ToolError("InvalidUrl", f"{_shown(raw)} is not a valid URL") from exc
    if url.scheme not in _ALLOWED_SCHEMES:
        raise ToolError(
            "UnsupportedScheme", f"{_shown(raw)}: only http and https URLs can be fetched"
        )
    if not url.host:
        raise ToolError("InvalidUrl", f"{_shown(raw)} has no host")
    return url


def _check_status(response: httpx.Response) -> None:
    status = response.status_code
    where = _shown(str(response.url))
    if status >= 500 or status in _TRANSIENT_4XX:
        raise TransientToolError(f"GET {where} returned HTTP status {status}")
    if status >= 400:
        raise ToolError("HttpError", f"GET {where} returned HTTP status {status}")


def _too_large(url: httpx.URL, limit: int) -> ToolError:
    return ToolError(
        "ResponseTooLarge",
        f"the response from {_shown(str(url))} is larger than the {limit} byte limit",
    )


async def _get(client: httpx.AsyncClient, url: httpx.URL, limit: int) -> ToolOutput:
    async with client.stream("GET", url) as response:
        _check_status(response)
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(response.url, limit)
        body = bytearray()
        # aiter_bytes yields decoded bytes, so the limit also stops decompression bombs.
        async for chunk in response.aiter_bytes():
            body.extend(chunk)
            if len(body) > limit:
                raise _too_large(response.url, limit)
        content_type = response.headers.get("content-type", "application/octet-stream")
        summary = (
            f"GET {_shown(str(response.url))}: HTTP {response.status_code}, "
            f"{len(body)} bytes, {content_type}"
        )
        return ToolOutput(content=bytes(body), content_type=content_type, summary=summary)


async def fetch_url(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    """GET an http(s) URL, following up to MAX_REDIRECTS redirects.

    The body is capped at ``ctx.fetch_max_bytes`` (ToolError "ResponseTooLarge") and the
    whole exchange at ``ctx.fetch_timeout_seconds``. 4xx raise ToolError("HttpError");
    5xx, 408/429, timeouts and connection failures raise TransientToolError.
    """
    url = _parse_url(args)
    timeout = ctx.fetch_timeout_seconds
    try:
        async with (
            httpx.AsyncClient(
                follow_redirects=True,
                max_redirects=MAX_REDIRECTS,
                timeout=httpx.Timeout(timeout),
                headers={"User-Agent": USER_AGENT},
            ) as client,
            # httpx timeouts are per operation; a server dripping bytes needs an overall cap.
            asyncio.timeout(timeout),
        ):
            return await _get(client, url, ctx.fetch_max_bytes)
    except httpx.UnsupportedProtocol as exc:
        # Raised when a redirect points at e.g. file:// or ftp://.
        raise ToolError(
            "UnsupportedScheme", f"{_shown(str(url))} redirected to a non-http(s) URL"
        ) from exc
    except httpx.TooManyRedirects as exc:
        raise ToolError(
            "TooManyRedirects", f"{_shown(str(url))} redirected more than {MAX_REDIRECTS} times"
        ) from exc
    except httpx.InvalidURL as exc:
        raise ToolError("InvalidUrl", f"{_shown(str(url))} led to an invalid URL") from exc
    except httpx.DecodingError as exc:
        # A corrupt Content-Encoding body will be just as corrupt on retry.
        raise ToolError(
            "InvalidResponse", f"the response from {_shown(str(url))} could not be decoded"
        ) from exc
    except (httpx.TransportError, TimeoutError) as exc:
        raise TransientToolError(
            f"GET {_shown(str(url))} failed: {type(exc).__name__}: {exc}"
        ) from exc
