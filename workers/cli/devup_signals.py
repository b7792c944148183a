"""Ctrl-C, SIGTERM and SIGHUP for `agentctl dev up`: whatever it is doing, what it started
stops.

The first signal asks for an orderly stop: the worker and the gateway wind down, then the
stack (before the worker serves, the start-up itself is cancelled). A second signal, or
GRACE_SECONDS without the process having ended (a worker stuck in a workflow task, a thread
that will not join), kills the stack from a thread of its own and ends the process: that
thread needs neither the event loop nor the main thread to be free.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Protocol

logger = logging.getLogger(__name__)

GRACE_SECONDS = 15.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_Handler = Callable[[int, FrameType | None], object] | int | None


class _Stoppable(Protocol):
    def stop(self, *, now: bool = False) -> None: ...


class StopOnSignals:
    """While entered (on the event loop's thread, the main one), SIGINT/SIGTERM/SIGHUP stop
    `stack`: the first by setting `stop` once `serving` is set (the worker polls and winds
    down when `stop` is set) and else by cancelling the task that entered; a second, or
    `grace` seconds later, by killing the stack and exiting."""

    def __init__(
        self, stack: _Stoppable, stop: asyncio.Event, *, grace: float = GRACE_SECONDS
    ) -> None:
        self.stack = stack
        self.stop = stop
        self.grace = grace
        self.serving = asyncio.Event()
        self.signalled: int | None = None
        self._now = threading.Event()
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, _Handler] = {}
        self._exit_status = 128 + signal.SIGINT

    def __enter__(self) -> StopOnSignals:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for sig in SIGNALS:
            if signal.getsignal(sig) == signal.SIG_IGN:
                continue  # `nohup`, or SIGINT for a shell's background job: left ignored
            # signal.signal, not loop.add_signal_handler: it runs even while the loop is
            # blocked; the worker is given `stop` and so installs no handlers of its own.
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.signalled is not None:
            # Stopping: the watchdog and these handlers stay until the process ends, so a
            # shutdown that hangs past here (a thread that will not join) still ends.
            return
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._exit_status = 128 + signum  # as if the last signal had ended the process
        if self.signalled is not None:
            self._now.set()
            return
        self.signalled = signum
        # os.write: a signal handler must not take the locks print or logging hold.
        os.write(2, b"\nstopping the dev stack (Ctrl-C again to stop at once)\n")
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._request_stop)
        threading.Thread(target=self._watchdog, name="devup-stop", daemon=True).start()

    def _request_stop(self) -> None:
        self.stop.set()
        if not self.serving.is_set() and self._task is not None:
            self._task.cancel()

    def _watchdog(self) -> None:
        if not self._now.wait(self.grace):
            logger.warning("dev up did not stop within %.0fs; killing the stack", self.grace)
        try:
            self.stack.stop(now=True)
        finally:
            os._exit(self._exit_status)
