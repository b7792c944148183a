"""A plain Server-Sent Events reader for tests: independent of workers/client/watch/sse.py, so the
gateway's stream is checked by a second parser, not by the one under test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Server-Sent Events as dicts {id?, event, data}; comments (heartbeats) skipped."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")
