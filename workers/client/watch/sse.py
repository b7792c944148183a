"""Reading Server-Sent Events (text/event-stream) incrementally, as the WHATWG HTML
standard's "event stream interpretation" does: lines end in CRLF, LF or CR (a CR ending one
chunk may be the first half of a CRLF), `data:` lines join with newlines, lines
starting with `:` are comments (heartbeats), a blank line dispatches, the last `id:` stays
in force until another replaces it, and an event cut off by the end of the stream is
dropped, never half-delivered.

The stream comes from a server we do not control (anything a URL points at), so a line or
an event larger than its bound is an error rather than memory spent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Far above any event of ours (an item as JSON); a cap so a hostile stream cannot make the
# client buffer without end.
MAX_EVENT_CHARS = 8 * 1024 * 1024

_EOL = re.compile(r"\r\n|\r|\n")


class SseError(Exception):
    """The stream is not a usable event stream (an event past its size bound)."""


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its type (`message` unless named), its data, and the last
    event id in force when it was dispatched (None until the stream sets one)."""

    event: str
    data: str
    id: str | None = None


class SseDecoder:
    """Feed text as it arrives; get the events it completes."""

    def __init__(self, max_event_chars: int = MAX_EVENT_CHARS) -> None:
        self._max = max_event_chars
        self._pending = ""
        self._data: list[str] = []
        self._size = 0
        self._event = ""
        self._first = True
        self._after_cr = False
        self.last_id: str | None = None

    def feed(self, text: str) -> list[SseEvent]:
        """The events completed by `text` (the next piece of the stream)."""
        if not text:
            return []
        if self._first:
            self._first = False
            text = text.removeprefix("\ufeff")  # one leading BOM is allowed, and ignored
        if self._after_cr:
            # The last chunk ended in a CR, taken as a line end at once (no waiting on a
            # stream that may be quiet for a while); a LF starting this one completes a CRLF.
            text = text.removeprefix("\n")
        self._after_cr = text.endswith("\r")
        self._pending += text
        events: list[SseEvent] = []
        start = 0
        for match in _EOL.finditer(self._pending):
            event = self._line(self._pending[start : match.start()])
            start = match.end()
            if event is not None:
                events.append(event)
        self._pending = self._pending[start:]
        if len(self._pending) + self._size > self._max:
            raise SseError(f"an event of more than {self._max} characters")
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: heartbeats keep proxies from closing a quiet stream
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]  # exactly one space after the colon is not part of the value
        if field == "data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self._max:
                raise SseError(f"an event of more than {self._max} characters")
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:  # an id with NUL is ignored, as specified
            self.last_id = value
        # Any other field is ignored; so is `retry:` (our client has its own bounded backoff).
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event or "message"
        self._data, self._size, self._event = [], 0, ""
        if not data:
            return None  # a blank line with no data dispatches nothing
        return SseEvent(event, "\n".join(data), self.last_id)
