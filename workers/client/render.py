"""How items and sessions look in a terminal."""

from __future__ import annotations

import re
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import shown_status

_ICONS: dict[str, str] = {
    ItemKind.USER_MESSAGE: "user",
    ItemKind.ASSISTANT_MESSAGE: "model",
    ItemKind.TOOL_CALL: "call",
    ItemKind.TOOL_RESULT: "result",
    ItemKind.APPROVAL: "approval",
    ItemKind.ERROR: "error",
}


# C0 and C1 control characters (ESC among them): text from a model, a tool or a gateway is
# untrusted, and an escape sequence in it could rewrite the terminal (titles, colours,
# cursor moves that hide lines).
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ItemView(Protocol):
    """What an item line shows: an ItemRow read from AgentState, or the gateway's Item."""

    @property
    def ordinal(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def tool_name(self) -> str | None: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def data(self) -> dict[str, Any]: ...


def one_line(text: str, width: int) -> str:
    """Untrusted text as one line of at most `width` characters, control characters out."""
    flat = " ".join(_CONTROLS.sub(" ", text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def item_line(item: ItemView, width: int = 60) -> str:
    kind = _ICONS.get(item.kind, item.kind)
    label = f"#{item.ordinal:<3} {kind:<8}"
    if item.kind == ItemKind.TOOL_CALL:
        args = item.data.get("arguments", {})
        arg_text = ", ".join(f"{k}={one_line(str(v), 40)!s}" for k, v in args.items())
        return f"{label} {item.tool_name}({arg_text})  [{item.tool_call_id}]"
    text = one_line(item.text, width)
    artifact = item.data.get("artifact")
    if artifact:
        text += f"  [artifact {artifact['sha256'][:12]} {artifact['size_bytes']} B]"
    if item.kind == ItemKind.TOOL_RESULT:
        return f"{label} {item.tool_name or ''} [{item.tool_call_id}] {text}"
    return f"{label} {text}"


def print_item(console: Console, item: ItemView) -> None:
    console.print(item_line(item), markup=False, highlight=False)


def status_line(status: str, wait: str | None, *, first: bool) -> str | None:
    """What a watch prints when a session's status changes: the model wait's line, or
    `status: X`; nothing for the status a watch starts in."""
    return wait or (None if first else f"status: {status}")


def partial_line(text: str, width: int) -> str:
    """A model reply still streaming, on one line: its latest `width` characters."""
    label = f"{'…':<4} {_ICONS[ItemKind.ASSISTANT_MESSAGE]:<8} "
    room = max(width - len(label) - 1, 10)
    flat = " ".join(_CONTROLS.sub(" ", text).split())
    return label + (flat if len(flat) <= room else "…" + flat[-(room - 1) :])


def timeline_table(session: SessionRow, items: list[ItemRow]) -> Table:
    shown = shown_status(session.status, session.checked)
    table = Table(title=f"session {session.id} · {shown}", show_lines=False)
    table.add_column("#", justify="right", min_width=3, no_wrap=True)
    table.add_column("kind", min_width=8, no_wrap=True)
    table.add_column("tool", min_width=10, no_wrap=True)
    table.add_column("call", min_width=8, no_wrap=True)
    table.add_column("text", no_wrap=True, overflow="ellipsis")
    table.add_column("artifact", min_width=22, no_wrap=True)
    for item in items:
        artifact = item.data.get("artifact")
        table.add_row(
            str(item.ordinal),
            _ICONS.get(item.kind, item.kind),
            item.tool_name or "",
            item.tool_call_id or "",
            one_line(item.text, 48),
            f"{artifact['sha256'][:12]} {artifact['size_bytes']} B" if artifact else "",
        )
    return table
