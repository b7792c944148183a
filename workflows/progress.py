"""Whether the loop is getting anywhere: a task that keeps making the same failing call, or
keeps replying with no progress, ends `stuck` with the reason instead of spending its steps.
Deterministic code only.

A reply makes progress when it is an answer or one of its calls succeeded. A non-answer (an
empty reply, a tool's bare arguments, example calls) and a reply whose every call failed, or
found nothing to change (a write of what the file already held), or repeated a read made
just before it, result and all (activities/repeated_calls.py), do not. The limit is the
task's `stuck_after` (its agent's Limits, else DEFAULT_STUCK_AFTER).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Progress:
    # Replies in a row that made none, and the most times one failing call was repeated.
    idle_replies: int = 0
    repeats: int = 0
    _succeeded: bool = False

    def reply(self) -> None:
        """A new reply's calls are about to run."""
        self._succeeded = False

    def call_ended(self, failed: bool, repeats: int, unchanged: bool = False) -> None:
        if failed:
            self.repeats = max(self.repeats, repeats)
        elif not unchanged:
            self._succeeded = True

    def calls_done(self) -> None:
        """Every call of the reply has ended (or started, on a device)."""
        self.idle_replies = 0 if self._succeeded else self.idle_replies + 1

    def idle(self) -> None:
        """A reply that is no answer and calls nothing."""
        self.idle_replies += 1

    def stuck(self, limit: int) -> str | None:
        """Why the task is stuck at `limit` (our words and numbers), or None."""
        if self.repeats >= limit:
            return f"stuck: the same failing call was made {self.repeats} times"
        if self.idle_replies >= limit:
            return f"stuck: {self.idle_replies} replies in a row made no progress"
        return None
