"""What a watch prints (workers/client/watch/printer.py through workers/client/render.py),
whichever way it reads the session: untrusted text cannot drive the terminal, a status repeated by a
reconnected stream prints once, and off a terminal deltas print nothing."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from durable_agents.workers.client.render import item_line, partial_line
from durable_agents.workers.client.watch.partial_replies import Delta
from durable_agents.workers.client.watch.printer import WatchPrinter


@dataclass
class Item:
    ordinal: int
    kind: str
    text: str
    tool_name: str | None = None
    tool_call_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def printed(run: Any, terminal: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=terminal, color_system=None)
    with WatchPrinter(console) as printer:
        run(printer)
    return out.getvalue()


def test_escape_sequences_from_a_model_never_reach_the_terminal() -> None:
    hostile = "done\x1b]0;pwned\x07\x1b[2J\x9b31m\rhidden"
    line = item_line(Item(3, "assistant_message", hostile))
    assert line == "#3   model    done ]0;pwned [2J 31m hidden"
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in line)
    assert "\x1b" not in partial_line(hostile, 80)
    call = item_line(
        Item(4, "tool_call", "", "write_file", "c1", {"arguments": {"path": "\x1b[1Aa"}})
    )
    assert "\x1b" not in call


def test_a_status_prints_when_it_changes_not_when_a_stream_repeats_it() -> None:
    def run(p: WatchPrinter) -> None:
        p.status("running", None)  # the status a watch starts in: not news
        p.status("waiting_approval", None)
        p.status("waiting_approval", None)  # a reconnected stream starts with it again
        p.status("waiting_model", "waiting_model: model call attempt 2 failed (HTTP 503)")
        p.status("running", None)
        p.ended("completed")

    assert printed(run).splitlines() == [
        "status: waiting_approval",
        "waiting_model: model call attempt 2 failed (HTTP 503)",
        "status: running",
        "task ended: completed",
    ]


def test_off_a_terminal_deltas_print_nothing_and_items_print_as_they_are() -> None:
    def run(p: WatchPrinter) -> None:
        assert p.show_deltas is False
        p.delta(Delta(1, 1, 0, 0, "partial"))
        p.item(Item(2, "assistant_message", "whole reply", data={"step": 1}))

    assert printed(run) == "#2   model    whole reply\n"


def test_on_a_terminal_the_committed_item_replaces_the_streamed_text() -> None:
    def run(p: WatchPrinter) -> None:
        assert p.show_deltas is True
        p.delta(Delta(1, 1, 0, 0, "streamed so far"))
        p.item(Item(2, "assistant_message", "whole reply", data={"step": 1}))

    screen = printed(run, terminal=True)
    assert "streamed so far" in screen
    assert screen.endswith("#2   model    whole reply\n")  # the partial line was erased first


def test_off_a_terminal_an_item_is_one_line_however_long() -> None:
    # A pipe or a log is read line by line (grep, the docs' samples): no wrap inside an item.
    long = Item(
        4,
        "tool_result",
        '{"entries": [' + '{"path": "README.md", "size": 174}, ' * 6 + "]}",
        "list_dir",
        "call_0_0",
        {"artifact": {"sha256": "8d60b8d6266a" * 5, "size_bytes": 426}},
    )
    assert len(item_line(long)) > 100
    assert printed(lambda p: p.item(long)).splitlines() == [item_line(long)]
    # A terminal wraps at its width.
    assert len(printed(lambda p: p.item(long), terminal=True).splitlines()) > 1
