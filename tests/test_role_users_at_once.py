"""Stacks that start at once as root (the suite's workers, CI's first minute) make their
services' system users together: every user each of them was handed still exists after,
under the uid it was handed (two useradds at once can lose one's entry, and initdb then
runs as a uid with no passwd entry)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import uuid

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root makes system users")

_MAKE = (
    "import sys\n"
    "from durable_agents.workers.stack.roles import role_user\n"
    "print(role_user(sys.argv[1], 'test').pw_uid)\n"
)


def test_users_made_at_once_all_keep_their_entries() -> None:
    names = [f"da-t{uuid.uuid4().hex[:8]}" for _ in range(6)]
    try:
        runs = [
            subprocess.Popen([sys.executable, "-c", _MAKE, name], stdout=subprocess.PIPE, text=True)
            for name in names * 2  # two stacks per user, all at once
        ]
        handed = [
            (name, int(run.communicate(timeout=120)[0]))
            for name, run in zip(names * 2, runs, strict=True)
        ]
        for name, uid in handed:
            assert pwd.getpwnam(name).pw_uid == uid
        assert len({uid for _, uid in handed}) == len(names)
    finally:
        userdel = shutil.which("userdel") or "/usr/sbin/userdel"
        for name in names:
            subprocess.run([userdel, name], capture_output=True, check=False)
