"""Who a tool's subprocess runs as, and keeping the worker's memory out of its reach.

A stdio MCP server (or anything else a tool spawns) is untrusted code. Scrubbing its
environment is not enough: a child of the same user can read the worker's
/proc/<pid>/environ (DATABASE_URL, S3 and model keys) and /proc/<pid>/mem. Two measures:

- The worker makes itself non-dumpable (prctl PR_SET_DUMPABLE 0). The kernel then owns its
  /proc/<pid>/{environ,mem,maps,fd} by root and refuses them to any process without
  CAP_SYS_PTRACE, whatever its uid. Inherited across fork, reset by exec, so the children
  it spawns stay ordinary.
- As root that is not enough (root holds CAP_SYS_PTRACE and reads every file), so the
  child runs as another, unprivileged user (AGENT_TOOL_USER, default `nobody`) with no
  supplementary groups and no way to regain privileges, through util-linux's setpriv.
  That user owns no service's data: the embedded stack, started as root, runs PostgreSQL
  and SeaweedFS as users of their own (SERVICE_USERS, refused here) and keeps Temporal's
  files root's, so a tool can neither read their files, rewrite their configuration nor
  signal them.

A worker that runs as a regular user cannot switch users: its tools run as that user. Its
memory and environment are closed to them, but the files that user can read (a .env, the
dev stack's state directory, ~/.aws) are not; run the worker as root with AGENT_TOOL_USER,
or as a user that holds nothing else, to close those too.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import pwd
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

DEFAULT_TOOL_USER = "nobody"
# The users the embedded stack runs PostgreSQL and SeaweedFS as (workers/stack/roles.py
# takes its names from here): a tool never runs as one, it would own their data.
SERVICE_USERS = ("durable-postgres", "durable-s3")
# linux/prctl.h
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
# The reachability probe's exit code for a cwd it cannot enter (4: the command).
_NO_CWD = 3
# Enter cwd (when given), find the command on PATH as execvp would, and check that this
# user may execute it: a 0700 directory on the way (/root, a private clone) fails here.
_PROBE = (
    '[ -z "$1" ] || cd -- "$1" || exit 3; p=$(command -v -- "$2") || exit 4; [ -x "$p" ] || exit 4'
)


class ToolIdentityError(ValueError):
    """A tool subprocess cannot run as the user it must run as (names what and who)."""


def _prctl(option: int, arg: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result: int = libc.prctl(option, arg, 0, 0, 0)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def make_non_dumpable() -> None:
    """Close this process's /proc files (environ, mem) to processes without
    CAP_SYS_PTRACE, its own children of the same user included; also no core dumps.
    Idempotent; a no-op off Linux."""
    if sys.platform == "linux":
        _prctl(_PR_SET_DUMPABLE, 0)


def is_dumpable() -> bool:
    """Whether other processes of this user may read this one's memory (Linux)."""
    return sys.platform != "linux" or _prctl(_PR_GET_DUMPABLE) != 0


@dataclass(frozen=True)
class RunAs:
    """Another user a tool subprocess runs as (the worker is root)."""

    user: str
    uid: int
    gid: int
    home: str
    setpriv: str

    def argv(self, command: str, args: Sequence[str]) -> tuple[str, list[str]]:
        """`command args` as this user: real, effective and saved ids switched, no
        supplementary groups, and no_new_privs so that a setuid binary gains nothing."""
        drop = [
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--",
        ]
        return self.setpriv, [*drop, command, *args]

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The child's own HOME and user names, unless the declaration sets them: root's
        HOME is not theirs to write."""
        mine = {"HOME": self.home, "USER": self.user, "LOGNAME": self.user}
        return {**mine, **env}

    async def check_reaches(
        self, what: str, command: str, cwd: str | None, env: Mapping[str, str]
    ) -> None:
        """Raise ToolIdentityError when this user cannot enter `cwd` or execute `command`:
        a clear error at start, not a server that dies on exec."""
        if "/" not in command:
            # The file the worker's PATH names: when this user cannot reach the first hit (a
            # private virtualenv's bin/ first on PATH), a later one must not quietly run.
            command = shutil.which(command, path=env.get("PATH", os.defpath)) or command
        probe, args = self.argv("sh", ["-c", _PROBE, "sh", cwd or "", command])
        proc = await asyncio.create_subprocess_exec(
            probe,
            *args,
            env=dict(env),
            cwd="/",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        code = await proc.wait()
        if code == 0:
            return
        raise _unreachable(what, self, command if code != _NO_CWD else None, cwd)


def _closed_to(user: RunAs, path: str) -> str | None:
    """The first directory on the way to path (as written) that user may not search, by its
    mode bits, with what they are; None when none is."""
    for directory in reversed(Path(path).parents):
        try:
            st = directory.stat()
        except OSError:
            return None
        if st.st_uid == user.uid:
            bit = stat.S_IXUSR
        else:
            bit = stat.S_IXGRP if st.st_gid == user.gid else stat.S_IXOTH
        if not st.st_mode & bit:
            owner = _user_name(st.st_uid)
            return f"{directory} (mode {stat.S_IMODE(st.st_mode):o}, {owner}'s) is closed to it"
    return None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _unreachable(what: str, user: RunAs, command: str | None, cwd: str | None) -> ToolIdentityError:
    """The refusal of a command (or, when None, a cwd) `user` cannot reach: one line that
    names what blocks it and what to do."""
    todo = f"install it where {user.user!r} can reach it"
    if command is None:
        where = f"enter its cwd {cwd}"
        blocker = _closed_to(user, os.path.join(cwd or "/", "."))
    elif "/" not in command:
        where, blocker = f"execute {command}", "it is not on the PATH it is given"
    else:
        where = f"execute {command}"
        path = os.path.abspath(os.path.join(cwd or os.getcwd(), command))
        blocker = _closed_to(user, path)
        if blocker is None:  # then maybe on the way to what a link leads to
            target = os.path.realpath(path)
            blocker = _closed_to(user, target)
            where += f" (-> {target})" if target != path else ""
        if Path(path).parent.parent.joinpath("pyvenv.cfg").is_file():
            todo = (
                f"put the virtualenv and the python it was made from where {user.user!r} can "
                "read them (e.g. /opt)"
            )
    return ToolIdentityError(
        f"{what} runs as {user.user!r} (the worker is root), which cannot {where}: "
        f"{blocker or 'a directory on the way may be private'}; {todo}, or name a user who "
        "can in AGENT_TOOL_USER (or the declaration's run_as)"
    )


def tool_identity(user: str | None, what: str) -> RunAs | None:
    """Whom `what` (a tool's subprocess) runs as: None for the worker's own user.

    `user` is a user name (AGENT_TOOL_USER or a declaration's run_as); None means
    DEFAULT_TOOL_USER when the worker is root, and the worker's own user otherwise."""
    euid = os.geteuid()
    if user is None:
        if euid != 0:
            return None
        user = DEFAULT_TOOL_USER
    if not isinstance(user, str) or not user or "\0" in user:
        raise ToolIdentityError(f"{what}: the user to run as must be a user name")
    if user in SERVICE_USERS:
        raise ToolIdentityError(
            f"{what}: {user!r} is a user the dev stack runs a service as, whose data a tool "
            "must not own; name another in AGENT_TOOL_USER (or the declaration's run_as)"
        )
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ToolIdentityError(f"{what}: there is no user named {user!r} to run as") from None
    if entry.pw_uid == euid:
        if euid == 0:
            logger.warning(
                "%s runs as root, as the worker does: it can read the worker's credentials",
                what,
            )
        return None
    if euid != 0:
        raise ToolIdentityError(
            f"{what}: running as {user!r} needs a worker that runs as root; this one runs "
            f"as uid {euid}, so leave AGENT_TOOL_USER and run_as unset or name this user"
        )
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise ToolIdentityError(
            f"{what}: running it as {user!r} needs setpriv (util-linux) on the worker's PATH"
        )
    return RunAs(user, entry.pw_uid, entry.pw_gid, entry.pw_dir, setpriv)
