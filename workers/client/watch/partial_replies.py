"""The client side of the token-delta contract: the partial reply text of each model step
while it streams, before its assistant item commits.

An SSE `delta` event's data is {"step", "attempt", "send", "seq", "text"}. Per step the
text of the highest (attempt, send) seen is kept; a higher one starting drops the lower
one's text (that attempt was retried, or its request re-sent after a context overflow),
and a late delta of a lower one is ignored. The committed assistant item of the step
replaces the partial text: it is the durable record, deltas are ephemeral.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

# A partial reply past this is cut (the committed item has it whole); bounds a client's
# memory against a runaway stream.
MAX_PARTIAL_CHARS = 256 * 1024


class DeltaLike(Protocol):
    """A delta as the gateway's stream sends it (Delta) or as storage.session_deltas reads
    it off NOTIFY (a watch reading AgentState directly)."""

    @property
    def step(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def send(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Delta:
    """A `delta` event's data, as a client reads it off the wire."""

    step: int
    attempt: int
    send: int
    seq: int
    text: str

    @classmethod
    def parse(cls, data: str) -> Delta | None:
        """The delta in an event's data, or None when it is not one (ignored, not fatal:
        deltas are a convenience and the committed item follows)."""
        try:
            raw = json.loads(data)
            fields = (raw["step"], raw["attempt"], raw["send"], raw["seq"])
            text = raw["text"]
        except (ValueError, KeyError, TypeError):
            return None
        if not all(type(f) is int and f >= 0 for f in fields) or not isinstance(text, str):
            return None
        return cls(*fields, text)


@dataclass
class _Partial:
    attempt: int
    send: int
    next_seq: int
    text: str


class PartialReplies:
    """The partial text of each step still streaming."""

    def __init__(self) -> None:
        self._steps: dict[int, _Partial] = {}

    def add(self, delta: DeltaLike) -> bool:
        """Take a delta; True when the shown text changed."""
        current = self._steps.get(delta.step)
        if current is not None and (delta.attempt, delta.send) < (current.attempt, current.send):
            return False  # a retried attempt's late delta
        if current is None or (delta.attempt, delta.send) > (current.attempt, current.send):
            current = _Partial(delta.attempt, delta.send, 0, "")
            self._steps[delta.step] = current
        if delta.seq < current.next_seq:
            return False  # a repeat
        # A gap (deltas missed while reconnecting: they are not replayed) is shown as it
        # is; the committed item sets the text right.
        current.next_seq = delta.seq + 1
        room = MAX_PARTIAL_CHARS - len(current.text)
        if room <= 0 or not delta.text:
            return False
        current.text += delta.text[:room]
        return True

    def commit(self, step: int) -> bool:
        """The step's assistant item committed: drop its partial text; True if there was some."""
        return self._steps.pop(step, None) is not None

    def texts(self) -> dict[int, str]:
        """Step -> partial text, in step order."""
        return {step: self._steps[step].text for step in sorted(self._steps)}
