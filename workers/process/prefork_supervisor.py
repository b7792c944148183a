"""What the parent of forked worker processes turns into once they are forked
(workers/process/prefork.py): a small process that passes stop signals on and waits for them.

    python -I -S workers/process/prefork_supervisor.py PID...

Standard library only, and run by path in a fresh interpreter: the parent execs this file
so that it stops holding its own copies of the pages the workers have written since the
fork (~50 MiB with two workers at 10,000 parked sessions, `bench/parked_approvals.py
--forked 2`).

SIGTERM or SIGINT is passed to every worker as SIGTERM; once all have exited the status is 0
(or the first failure among them). A worker that exits while no stop was asked for stops the
others, and the status is that worker's (128 + n when signal n killed it, as a shell says).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
PREFIX = "durable-agents prefork:"


def exit_code(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def supervise(workers: Sequence[int]) -> int:
    """Wait for `workers` (pids, this process's children, in fork order); the group's status."""
    children = {pid: index for index, pid in enumerate(workers)}
    stopping = False
    status = 0

    def stop_children(_signum: int | None = None, _frame: FrameType | None = None) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):  # exited, not yet reaped
                os.kill(pid, signal.SIGTERM)

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop_children)
    # The forking process blocked these until every worker was forked and this was in place.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    while children:
        try:
            pid, wait_status = os.wait()  # retried after a signal handler runs (PEP 475)
        except ChildProcessError:
            break
        index = children.pop(pid, None)
        if index is None:
            continue
        code = exit_code(wait_status)
        if not stopping:
            print(
                f"{PREFIX} worker process {pid} (#{index}) exited with status {code}: "
                "stopping the others",
                file=sys.stderr,
                flush=True,
            )
            status = code or 1
            stop_children()
        elif code not in (0, 128 + signal.SIGTERM) and status == 0:
            # (a worker stopped by SIGTERM before its own handler was in place is clean)
            status = code
    return status


def main(argv: Sequence[str]) -> int:
    try:
        workers = [int(arg) for arg in argv]
    except ValueError:
        workers = []
    if not workers:
        print(f"{PREFIX} usage: prefork_supervisor.py PID...", file=sys.stderr)
        return 2
    return supervise(workers)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
