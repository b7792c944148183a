"""The users the embedded stack's services run as when it is started as root.

Each service that keeps data runs as a system user of its own, named for its role, so that
none holds another's files and the tool user (AGENT_TOOL_USER, default `nobody`:
activities/tools/tool_identity.py) holds none of them: a stdio MCP server cannot read
PostgreSQL's or SeaweedFS's data files, rewrite their configuration or signal their
processes (DESIGN.md invariant 13). Temporal's dev server stays root's, its files private to
root (_process.SERVICE_UMASK). The users are made once, with useradd, with no home and no
login shell; PostgreSQL needs one with a passwd entry anyway (initdb and postgres look up
the user they run as). _runas says how each service runs as its user.

A stack started by a regular user cannot switch users: every service runs as that user, and
so do the tools of a worker of that user, which can then read the stack's files and signal
its processes. DevStack says so when it starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from durable_agents.activities.tools.tool_identity import SERVICE_USERS
from durable_agents.workers.stack.errors import StackError

logger = logging.getLogger(__name__)

# Named where the tool user is chosen, which refuses them.
POSTGRES_USER, S3_USER = SERVICE_USERS
# Two stacks starting at once (the suite's workers) may both find the user missing: their
# useradds take turns under one lock (two at once can lose one's entry, and initdb then
# runs as a uid with no passwd entry), and a stack that finds the user made meanwhile reads it.
# A useradd that still fails (/etc/passwd locked by another program) is tried again.
_TRIES = 20
# In /run, which only root writes: nobody else can hold the lock or plant the file.
_LOCK = Path("/run/durable-agents-useradd.lock")
_NOLOGIN = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false")


def role_user(name: str, what: str) -> pwd.struct_passwd:
    """The passwd entry of the system user `what` (a service) runs as, made on first use.
    StackError when it cannot be made, or when it is root."""
    failure = ""
    for attempt in range(_TRIES):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            pass
        else:
            if entry.pw_uid == 0:
                raise StackError(f"{what}: the user {name!r} it runs as must not be root")
            return entry
        if attempt:
            time.sleep(0.1)
        with _users_lock():
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                failure = _useradd(name, what)
            else:
                continue  # made meanwhile: read (and checked) at the loop's top
    raise StackError(
        f"{what}: running as root, it runs as the system user {name!r}, which could not be "
        f"made ({failure}); create it with `{' '.join(_useradd_argv(name, what, 'useradd'))}`"
        ", or start the stack as a regular user"
    )


@contextlib.contextmanager
def _users_lock() -> Iterator[None]:
    """One of our useradds at a time on this machine (root only: only root makes users)."""
    if not _LOCK.parent.is_dir():
        yield  # no /run: the retries above are all there is
        return
    fd = os.open(_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _useradd(name: str, what: str) -> str:
    """Run useradd for name; what went wrong, or "" when it worked."""
    useradd = shutil.which("useradd") or shutil.which("useradd", path="/usr/sbin:/sbin")
    if useradd is None:
        return "useradd is not installed"
    done = subprocess.run(
        _useradd_argv(name, what, useradd), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return done.stderr.strip() or f"useradd exited with {done.returncode}"
    logger.info("dev stack: made the system user %s for %s", name, what)
    return ""


def _useradd_argv(name: str, what: str, useradd: str) -> list[str]:
    shell = next((s for s in _NOLOGIN if Path(s).exists()), _NOLOGIN[-1])
    return [
        useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
        "--shell", shell, "--comment", f"durable-agents dev stack {what}", name,
    ]  # fmt: skip


def shared_user_warning() -> str | None:
    """What a stack started by a regular user cannot keep apart, or None as root."""
    if os.geteuid() == 0:
        return None
    return (
        f"dev stack: not root, so PostgreSQL, SeaweedFS and Temporal run as uid "
        f"{os.geteuid()}, as do the tool subprocesses of a worker of that user: those can read "
        "the stack's files and signal its processes; start both as root to run each service "
        f"as its own user ({POSTGRES_USER}, {S3_USER}) and tools as AGENT_TOOL_USER"
    )
