"""Several worker processes forked from one that imported their code once (`agentctl worker
--processes N`).

One Python process runs its Temporal worker's activations, activities and local activities
on one thread at a time, so a single process cannot use a second core. Separate processes
can, but each imports the same ~115 MiB of modules and loads its own tokenizer. Forked after
those imports (and the tokenizer's loading), the children share those pages until one writes
to one: `gc.freeze()` first moves every object the imports made out of the collector's
reach, so collections in a child do not write to (and copy) the shared pages.

Each child is a whole cloud worker with its own Temporal client, connection pool and
workflow cache (`AGENT_MAX_CACHED_WORKFLOWS` is per process). Only the parent's imports are
shared: it starts no thread, event loop, connection or Temporal runtime before it forks.

Once the children are forked, the parent execs workers/process/prefork_supervisor.py, a fresh
interpreter with the standard library only: its own copy of every page a child has written
since the fork (refcounts, the interpreter's specialised bytecode) would otherwise be held
for nothing, ~50 MiB with two workers at 10,000 parked sessions (`bench/parked_approvals.py
--forked 2`, docs/BENCHMARKS.md "Parked sessions"). Same process, same pid.

Lifecycle: SIGTERM or SIGINT to the parent is passed to every child, each finishes its
shutdown, and the parent exits 0. A child that exits on its own (a crash, an OOM kill, a
refused start) stops the others and the parent exits with that child's status, so the
supervisor that restarts a single worker restarts the group. A parent killed outright
(SIGKILL) takes its children with it: each asks the kernel for SIGTERM when it dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from durable_agents.vocabulary.tokens import get_encoding
from durable_agents.workers.process import prefork_supervisor

logger = logging.getLogger(__name__)

STOP_SIGNALS = prefork_supervisor.STOP_SIGNALS
PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
# All the supervisor needs of the environment: it passes signals on and prints a line.
_SUPERVISOR_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def threads_in_process() -> int:
    return len(os.listdir("/proc/self/task"))


def _stop_with_parent(parent: int) -> None:
    """Have the kernel send this process SIGTERM when its parent dies (Linux), so a parent
    killed outright leaves no worker behind; a parent gone already means stop now."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        raise SystemExit(0)


def _child(index: int, parent: int, serve: Callable[[int], None]) -> NoReturn:
    """Run `serve(index)` in a forked child and leave without returning to the caller."""
    code = 0
    try:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        _stop_with_parent(parent)
        serve(index)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit: the parent's atexit handlers and finalizers are not the child's.
        os._exit(code)


def run_forked(
    processes: int, serve: Callable[[int], None], *, encoding: str | None = None
) -> NoReturn:
    """Fork `processes` children that each run `serve(i)` (i = 0..processes-1), then become
    their supervisor (workers/process/prefork_supervisor.py), which exits with the group's status
    (0 after a requested stop). `encoding`: the tokenizer the workers count with, loaded
    here once so that they share it. Does not return."""
    if processes < 1:
        raise ValueError(f"--processes must be at least 1 (got {processes})")
    if threads_in_process() > 1:
        # fork() copies only the calling thread: a lock another thread held stays held.
        raise RuntimeError("worker processes must be forked before any thread starts")
    if encoding is not None:
        get_encoding(encoding)
    gc.freeze()
    parent = os.getpid()
    children: list[int] = []
    # A stop signal during the forks waits (blocked, through the exec) until every child is
    # forked and the supervisor has its handler in place.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        for index in range(processes):
            pid = os.fork()
            if pid == 0:
                _child(index, parent, serve)
            children.append(pid)
        logger.info("forked %d worker processes: %s", processes, children)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        # The children keep the imports they share; this process's own copies of the
        # pages they have written since would be waste, so it stops being this process.
        # Without the credentials in its environment: exec makes a process dumpable again,
        # and a tool's subprocess of the workers' user could read its /proc/<pid>/environ.
        os.execve(
            sys.executable,
            [sys.executable, "-I", "-S", prefork_supervisor.__file__, *map(str, children)],
            {name: os.environ[name] for name in _SUPERVISOR_ENV if name in os.environ},
        )
    except BaseException:  # a fork or the exec failed: no worker is left unsupervised
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        gc.unfreeze()
        raise
