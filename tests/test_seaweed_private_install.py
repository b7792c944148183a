"""SeaweedFS starts when its binary sits under a directory only its owner can enter: a clone
(and its .venv) in /root or in a `mktemp -d`. As root, weed runs as its role user
(workers/stack/roles.py), from a root-owned read-only copy of the binary when that user
cannot reach the original; with the state dir private too, in a user namespace."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable_agents.workers.stack import SeaweedServer
from durable_agents.workers.stack._process import find_executable
from durable_agents.workers.stack.roles import S3_USER


@pytest.fixture(scope="module")
def private_weed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The weed binary copied under a 0700 directory, as a private clone's .venv holds it."""
    top = tmp_path_factory.mktemp("private-venv")
    top.chmod(0o700)
    weed = top / "bin" / "weed"
    weed.parent.mkdir()
    shutil.copy2(find_executable("weed"), weed)
    return weed


@pytest.fixture(scope="module")
def cache_root() -> Iterator[Path]:
    # Root-owned and world-searchable like /var/cache, but thrown away afterwards.
    root = Path(tempfile.mkdtemp(prefix="weed-cache-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    (uids,) = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
    return int(uids[0])


@pytest.mark.parametrize("state_dir", ["world-searchable", "private"])
def test_seaweed_starts_with_its_binary_under_a_private_directory(
    state_dir: str, private_weed: Path, cache_root: Path, tmp_path: Path
) -> None:
    if state_dir == "world-searchable":
        state = Path(tempfile.mkdtemp(prefix="weed-private-install-"))
        state.chmod(0o755)
    else:
        state = tmp_path  # pytest's own 0700 tmp dirs
    server = SeaweedServer(state / "s3", port=0, executable=private_weed, cache_root=cache_root)
    try:
        server.start()
        s3 = server.client()
        s3.put_object(Bucket=server.bucket, Key="k", Body=b"v")
        assert s3.get_object(Bucket=server.bucket, Key="k")["Body"].read() == b"v"
        uid = _uid_of(server.pid or 0)
        if state_dir == "world-searchable":
            expected = pwd.getpwnam(S3_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
            assert uid == expected
            assert server.data_dir.stat().st_uid == expected
        server.stop()
        server.start()  # a second start finds its data as it left it
        assert server.client().get_object(Bucket=server.bucket, Key="k")["Body"].read() == b"v"
    finally:
        server.stop()
        if state_dir == "world-searchable":
            shutil.rmtree(state, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs weed as another user")
def test_a_data_dir_another_user_left_is_given_whole_to_weeds_user(cache_root: Path) -> None:
    """A stack that ran weed as root (or as another user) left its files to that user:
    weed's user gets all of them, not only the top directory."""
    state = Path(tempfile.mkdtemp(prefix="weed-takeover-"))
    state.chmod(0o755)
    server = SeaweedServer(state / "s3", port=0, cache_root=cache_root)
    try:
        server.start()
        server.client().put_object(Bucket=server.bucket, Key="k", Body=b"v")
        server.stop()
        for dirpath, dirnames, filenames in os.walk(server.data_dir):
            for name in [".", *dirnames, *filenames]:
                os.chown(Path(dirpath, name), 0, 0, follow_symlinks=False)
        server.start()
        assert server.client().get_object(Bucket=server.bucket, Key="k")["Body"].read() == b"v"
        s3_uid = pwd.getpwnam(S3_USER).pw_uid
        for dirpath, dirnames, filenames in os.walk(server.data_dir):
            for name in [".", *dirnames, *filenames]:
                assert Path(dirpath, name).lstat().st_uid == s3_uid, Path(dirpath, name)
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)
