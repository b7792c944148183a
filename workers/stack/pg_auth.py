"""Password logins for the embedded PostgreSQL: one generated password per role and state dir.

The plain passwords live in one file beside the cluster, owned by whoever runs the stack and
readable by nobody else (0600): the clients need them, in the URLs. The server never sees
them: it gets SCRAM-SHA-256 verifiers, so its data dir (owned by its role user when we are
root) and its log hold nothing a login could be made from.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from durable_agents.workers.stack.errors import StackError
from durable_agents.workers.stack.ports import LOOPBACK
from durable_agents.workers.stack.private_file import write_private_file

# PostgreSQL's own default iteration count (scram_iterations).
_ITERATIONS = 4096

# Written over whatever the cluster had (an older dev stack's initdb -A trust) on every
# start: password logins only, over loopback TCP or the server's own socket.
HBA_CONF = f"""\
# Written by the dev stack (workers/stack/pg_auth.py) on every start; edits are lost.
# Every role logs in with its password (SCRAM-SHA-256), from this machine only.
local   all   all                     scram-sha-256
host    all   all   {LOOPBACK}/32   scram-sha-256
"""


def scram_verifier(password: str, *, salt: bytes | None = None) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for password (RFC 5802, 7677): what
    `ALTER ROLE ... PASSWORD` accepts in place of the plain text."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, _ITERATIONS)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${_ITERATIONS}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def role_passwords(path: Path, roles: Iterable[str]) -> tuple[dict[str, str], bool]:
    """The password of each role, from path; roles it lacks get a new one, written back.
    Also whether any was new. StackError when the file is not private to us."""
    passwords = _read(path)
    missing = [role for role in roles if role not in passwords]
    for role in missing:
        # URL-safe: goes into a database URL as is.
        passwords[role] = secrets.token_urlsafe(24)
    if missing:
        _write(path, passwords)
    return passwords, bool(missing)


def _read(path: Path) -> dict[str, str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise StackError(
            f"postgres: cannot read the password file {path}: {err.strerror}"
        ) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise StackError(
                f"postgres: the password file {path} must be a file of user {os.geteuid()} "
                f"that only its owner may read (mode 0600, it is {stat.filemode(st.st_mode)}); "
                "delete it and the next start makes new passwords"
            )
        raw = f.read()
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in data.items()
    ):
        raise StackError(
            f"postgres: the password file {path} is not a JSON object of role passwords; "
            "delete it and the next start makes new passwords"
        )
    return data


def _write(path: Path, passwords: dict[str, str]) -> None:
    write_private_file(path, json.dumps(passwords, indent=1, sort_keys=True) + "\n")
