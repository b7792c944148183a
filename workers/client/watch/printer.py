"""What a watch prints, whichever way it reads the session (AgentState directly, or the
gateway's event stream): committed items, changes of status, the end, and on a terminal the
model's reply as it streams (partial_replies.py beside this module), replaced by its item on
commit.

Lines go through workers/client/render.py, the one renderer; each is flushed at once, so a watch
piped into another program is as live as one on a terminal.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.text import Text

from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.client.render import ItemView, item_line, partial_line, status_line
from durable_agents.workers.client.watch.partial_replies import DeltaLike, PartialReplies


class WatchPrinter:
    """Prints one watch; use as a context manager so a streaming reply's line is cleared."""

    def __init__(self, console: Console, *, show_deltas: bool | None = None) -> None:
        self.console = console
        # Deltas only where a line can be redrawn: on a pipe or in a log, committed items only.
        self.show_deltas = console.is_terminal if show_deltas is None else show_deltas
        self._shown: tuple[str, str | None] | None = None
        self._partials = PartialReplies()
        self._live: Live | None = None

    def __enter__(self) -> WatchPrinter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop_live()

    def item(self, item: ItemView) -> None:
        """A committed item; an assistant item replaces its step's streamed text."""
        if item.kind == ItemKind.ASSISTANT_MESSAGE:
            step = item.data.get("step")
            if isinstance(step, int) and self._partials.commit(step):
                self._redraw()
        # A terminal wraps at its width; a pipe or a log gets each item whole on one line.
        self._line(item_line(item), soft_wrap=not self.console.is_terminal)

    def status(self, status: str, wait: str | None) -> None:
        """The session's status (and model wait line), printed when it changes."""
        shown = (status, wait)
        if shown == self._shown:
            return  # a reconnected stream starts with the status again
        line = status_line(status, wait, first=self._shown is None)
        self._shown = shown
        if line:
            self._line(line)

    def delta(self, delta: DeltaLike) -> None:
        """A piece of a model reply still streaming (shown on a terminal only)."""
        if self.show_deltas and self._partials.add(delta):
            self._redraw()

    def ended(self, status: str) -> None:
        self._stop_live()
        self._line(f"task ended: {status}")

    def _line(self, text: str, *, soft_wrap: bool = True) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=soft_wrap)
        self.console.file.flush()

    def _redraw(self) -> None:
        texts = self._partials.texts()
        if not texts:
            self._stop_live()
            return
        width = self.console.width
        lines = Text("\n".join(partial_line(t, width) for t in texts.values()), style="dim")
        if self._live is None:
            # Started only while a reply streams, so nothing redraws under a prompt
            # (the demo asks for approvals on the same terminal).
            self._live = Live(lines, console=self.console, auto_refresh=False, transient=True)
            self._live.start()
        self._live.update(lines, refresh=True)

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
