"""Following a session through the gateway's event stream and printing it as a watch does:
`agentctl watch --gateway`, and the demo's live view."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import pydantic

from durable_agents.vocabulary.session_status import shown_status
from durable_agents.workers.client.gateway_client import Gateway, GatewayError, follow_session
from durable_agents.workers.client.http_bodies import Item
from durable_agents.workers.client.watch.partial_replies import Delta
from durable_agents.workers.client.watch.printer import WatchPrinter
from durable_agents.workers.client.watch.sse import SseEvent


async def watch_via_gateway(
    gateway: Gateway,
    session_id: str,
    printer: WatchPrinter,
    *,
    after: int = 0,
    on_reconnect: Callable[[str], None] | None = None,
) -> str:
    """Print the session's items, status changes and (per the printer) streaming replies
    until it ends; its final status."""
    # Closed on return: the connection ends with the follow, not when the generator is collected.
    events = follow_session(gateway, session_id, after=after, on_reconnect=on_reconnect)
    async with aclosing(events):
        async for event in events:
            ended = _show(event, printer)
            if ended is not None:
                return ended
    raise GatewayError("the gateway's stream ended without its end event")  # pragma: no cover


def _show(event: SseEvent, printer: WatchPrinter) -> str | None:
    """Print one event; the session's final status when it is the end."""
    if event.event == "item":
        try:
            printer.item(Item.model_validate_json(event.data))
        except pydantic.ValidationError:
            raise GatewayError(_malformed(event)) from None
    elif event.event == "status":
        data = _object(event)
        detail = data.get("detail")
        printer.status(str(data.get("status", "")), detail if isinstance(detail, str) else None)
    elif event.event == "delta":
        delta = Delta.parse(event.data)
        if delta is not None:
            printer.delta(delta)
    elif event.event == "end":
        data = _object(event)
        status, checked = str(data.get("status", "")), data.get("checked")
        printer.ended(shown_status(status, checked if isinstance(checked, bool) else None))
        return status
    # Other event types are a newer gateway's: not ours to show.
    return None


def _object(event: SseEvent) -> dict[str, Any]:
    try:
        data = json.loads(event.data)
    except ValueError:
        raise GatewayError(_malformed(event)) from None
    if not isinstance(data, dict):
        raise GatewayError(_malformed(event))
    return data


def _malformed(event: SseEvent) -> str:
    return f"the gateway sent a malformed {event.event[:40]!r} event"
