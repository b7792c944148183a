"""How items and sessions look in a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from storage.item_kinds import ItemKind
from storage.models import ItemRow, SessionRow

_ICONS: dict[str, str] = {
    ItemKind.USER_MESSAGE: "user",
    ItemKind.ASSISTANT_MESSAGE: "model",
    ItemKind.TOOL_CALL: "call",
    ItemKind.TOOL_RESULT: "result",
    ItemKind.APPROVAL: "approval",
    ItemKind.ERROR: "error",
}


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def item_line(item: ItemRow, width: int = 60) -> str:
    kind = _ICONS.get(item.kind, item.kind)
    label = f"#{item.ordinal:<3} {kind:<8}"
    if item.kind == ItemKind.TOOL_CALL:
        args = item.data.get("arguments", {})
        arg_text = ", ".join(f"{k}={_one_line(str(v), 40)!s}" for k, v in args.items())
        return f"{label} {item.tool_name}({arg_text})  [{item.tool_call_id}]"
    text = _one_line(item.text, width)
    artifact = item.data.get("artifact")
    if artifact:
        text += f"  [artifact {artifact['sha256'][:12]} {artifact['size_bytes']} B]"
    if item.kind == ItemKind.TOOL_RESULT:
        return f"{label} {item.tool_name or ''} [{item.tool_call_id}] {text}"
    return f"{label} {text}"


def print_item(console: Console, item: ItemRow) -> None:
    console.print(item_line(item), markup=False, highlight=False)


def timeline_table(session: SessionRow, items: list[ItemRow]) -> Table:
    table = Table(title=f"session {session.id} · {session.status}", show_lines=False)
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
            _one_line(item.text, 48),
            f"{artifact['sha256'][:12]} {artifact['size_bytes']} B" if artifact else "",
        )
    return table
