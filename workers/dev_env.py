"""The dev stack's variables, for a process started in any directory.

`agentctl dev up` writes the stack's variables as `export NAME=value` lines (0600) twice: to
its state dir (`.devstack/env` by default) and to a per-user record, USER_RECORD under
$XDG_STATE_HOME (default ~/.local/state), which it removes when the stack stops. Settings
and the Temporal connection take them, per variable, below the environment:

    a variable set in the environment > ./.devstack/env > the per-user record

The two files are never mixed: the first one found is the stack. Only STACK_VARIABLES are
taken from a file, and only from a regular file owned by this user that no one else may
write; any other file is ignored with a warning.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# What StackEndpoints.env() writes (tests/test_devstack.py holds them equal).
STACK_VARIABLES = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "DATABASE_URL",
    "DATABASE_MIGRATION_URL",
    "S3_ENDPOINT_URL",
    "S3_ACCESS_KEY_ID",
    "S3_SECRET_ACCESS_KEY",
    "S3_BUCKET",
)
# A stack given by the environment alone names at least these.
ENVIRONMENT_STACK = ("DATABASE_URL", "S3_ENDPOINT_URL", "TEMPORAL_ADDRESS")
DEV_ENV_FILE = Path(".devstack") / "env"  # `dev up`'s default state dir, from the current one
STATE_HOME_ENV = "XDG_STATE_HOME"
USER_RECORD = Path("durable-agents") / "devstack.env"
NO_STACK = (
    "no dev stack found: run `agentctl dev up` "
    "(or set DATABASE_URL, S3_ENDPOINT_URL and TEMPORAL_ADDRESS)"
)

_LINE = re.compile(r"(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)")
_warned: set[tuple[str, int, int, int]] = set()


class DevEnvError(ValueError):
    """No dev stack's variables to be had: a malformed file, or no stack at all."""


@dataclass(frozen=True)
class StackFile:
    """A dev stack's env file, as read: its STACK_VARIABLES only."""

    path: Path
    values: Mapping[str, str]


def user_record() -> Path:
    """Where `dev up` records the running stack for this user (XDG base directories: a
    relative XDG_STATE_HOME is ignored)."""
    home = os.environ.get(STATE_HOME_ENV, "")
    base = Path(home) if os.path.isabs(home) else Path.home() / ".local" / "state"
    return base / USER_RECORD


def export_lines(env: Mapping[str, str]) -> str:
    """env as `export NAME=value` lines for a POSIX shell."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())


def read_stack_file(path: Path) -> StackFile | None:
    """path's STACK_VARIABLES; None when there is no such file or it is not safe to take
    (warned once). DevEnvError when a line is not `export NAME=value`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        _ignore(path, (0, 0, 0), f"cannot be read ({err.strerror})")
        return None
    with os.fdopen(fd, encoding="utf-8", errors="replace") as f:
        st = os.fstat(f.fileno())
        seen = (st.st_ino, st.st_uid, st.st_mode)
        if not stat.S_ISREG(st.st_mode):
            _ignore(path, seen, "is not a regular file")
            return None
        if st.st_uid != os.geteuid():
            _ignore(path, seen, f"is owned by uid {st.st_uid}, not by this user")
            return None
        if st.st_mode & 0o022:
            _ignore(path, seen, "may be written by other users (chmod 600 it)")
            return None
        text = f.read()
    return StackFile(path, _parse(path, text))


def find_stack_file() -> StackFile | None:
    """The dev stack this process uses: ./.devstack/env, else the per-user record."""
    for path in (DEV_ENV_FILE, user_record()):
        if (found := read_stack_file(path)) is not None:
            return found
    return None


def stack_defaults() -> dict[str, str]:
    """The dev stack's variables not set in the environment: what settings and the Temporal
    connection take where the environment says nothing. No file is read when the
    environment sets them all."""
    missing = [name for name in STACK_VARIABLES if name not in os.environ]
    if not missing:
        return {}
    found = find_stack_file()
    values = found.values if found is not None else {}
    return {name: values[name] for name in missing if name in values}


def stack_env() -> dict[str, str]:
    """Every dev stack variable as this process uses it (the environment over the file),
    in STACK_VARIABLES order; DevEnvError(NO_STACK) when no file is found and the
    environment does not name a stack (ENVIRONMENT_STACK)."""
    found = find_stack_file()
    if found is None and not all(name in os.environ for name in ENVIRONMENT_STACK):
        raise DevEnvError(NO_STACK)
    values = found.values if found is not None else {}
    env = {name: os.environ.get(name, values.get(name)) for name in STACK_VARIABLES}
    return {name: value for name, value in env.items() if value is not None}


def _parse(path: Path, text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assigned = _assignment(line)
        if assigned is None:
            # The line itself is never quoted back: it may hold a password.
            raise DevEnvError(
                f"{path}, line {number}, is not `export NAME=value`: remove the file or run "
                "`agentctl dev up` again to rewrite it"
            )
        name, value = assigned
        if name in STACK_VARIABLES:
            values[name] = value
    return values


def _assignment(line: str) -> tuple[str, str] | None:
    match = _LINE.fullmatch(line)
    if match is None:
        return None
    try:
        words = shlex.split(match["value"], comments=True)
    except ValueError:  # an unclosed quote
        return None
    if len(words) > 1:
        return None
    return match["name"], words[0] if words else ""


def _ignore(path: Path, seen: tuple[int, int, int], why: str) -> None:
    key = (str(path), *seen)
    if key not in _warned:
        _warned.add(key)
        logger.warning("ignoring the dev stack's env file %s: it %s", path, why)
