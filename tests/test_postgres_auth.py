"""The embedded PostgreSQL asks every role for its password (SCRAM-SHA-256), the superuser
too, on loopback only; the passwords are made per state dir and kept in a 0600 file the
server never reads. An older state dir made with `initdb -A trust` is brought to this on its
next start, its data kept. docker-compose's PostgreSQL asks for passwords too."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from durable_agents.workers.stack import PostgresServer, StackError
from durable_agents.workers.stack.pg_auth import role_passwords
from tests.test_compose import SERVICES, env_of

ROLES = ("postgres", "agent_owner", "agent")
# What `initdb -A trust` wrote, and older dev stacks ran with.
TRUST_HBA = """\
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    all             all             ::1/128                 trust
"""


def dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def new_server(prefix: str) -> PostgresServer:
    state = Path(tempfile.mkdtemp(prefix=prefix))
    state.chmod(0o755)  # as root, postgres runs as an unprivileged user who must enter it
    return PostgresServer(state / "postgres", port=0, fsync=False)


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    pg = new_server("pg-auth-")
    try:
        pg.start()
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(pg.data_dir.parent, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_ambient_password(monkeypatch: pytest.MonkeyPatch) -> None:
    # libpq and asyncpg would fall back on these: a refusal must come from the server.
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")


async def login(server: PostgresServer, role: str, password: str | None, **where: str) -> str:
    where = where or {"host": "127.0.0.1"}
    conn = await asyncpg.connect(
        port=server.port, user=role, password=password, database="agent", **where
    )
    try:
        return str(await conn.fetchval("SELECT current_user"))
    finally:
        await conn.close()


@pytest.mark.parametrize("password", [None, "", "wrong-password"])
@pytest.mark.parametrize("role", ROLES)
async def test_no_role_logs_in_without_its_password(
    server: PostgresServer, role: str, password: str | None
) -> None:
    with pytest.raises(asyncpg.InvalidPasswordError):
        await login(server, role, password)
    # The server's own socket too (`initdb -A trust` trusted it as well).
    with pytest.raises(asyncpg.InvalidPasswordError):
        await login(server, role, password, host=str(server.data_dir))


async def test_a_right_url_logs_in_and_the_superuser_only_with_its_own_password(
    server: PostgresServer,
) -> None:
    for url, role in ((server.url, "agent"), (server.owner_url, "agent_owner")):
        conn = await asyncpg.connect(dsn(url))
        try:
            assert await conn.fetchval("SELECT current_user") == role
            # What the superuser could do with no password before.
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("COPY (SELECT 1) TO PROGRAM 'true'")
        finally:
            await conn.close()
    assert await login(server, "postgres", server.password("postgres")) == "postgres"
    # A role's password is its own: the app role's does not open the owner.
    with pytest.raises(asyncpg.InvalidPasswordError):
        await login(server, "agent_owner", server.password("agent"))


def test_every_rule_asks_for_a_password_and_only_loopback_listens(server: PostgresServer) -> None:
    rules = server.psql("SELECT type, address, auth_method, error FROM pg_hba_file_rules")
    assert sorted(rules.splitlines()) == ["host|127.0.0.1|scram-sha-256|", "local||scram-sha-256|"]
    assert server.psql("SHOW listen_addresses") == "127.0.0.1"
    assert server.psql("SHOW password_encryption") == "scram-sha-256"
    stored = server.psql(
        "SELECT rolname, left(rolpassword, 14) FROM pg_authid WHERE rolcanlogin ORDER BY 1"
    )
    assert stored.splitlines() == [f"{role}|SCRAM-SHA-256$" for role in sorted(ROLES)]
    assert listening_addresses(server.port) == {"127.0.0.1"}


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on port, from /proc/net/tcp{,6}."""
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                if table == "tcp":
                    found.add(".".join(str(b) for b in reversed(raw)))
                else:
                    found.add(raw.hex())
    return found


def test_the_passwords_are_private_to_us_and_never_reach_the_server(
    server: PostgresServer,
) -> None:
    st = server.password_file.lstat()
    assert stat.S_ISREG(st.st_mode)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o600)
    passwords = json.loads(server.password_file.read_text())
    assert set(passwords) == set(ROLES)
    assert len(set(passwords.values())) == 3
    assert all(len(p) >= 32 for p in passwords.values())
    # Neither the data dir (the server's user owns it when we are root) nor its log holds
    # a password: the server was given verifiers only.
    for path in [server.log_path, *server.data_dir.rglob("*")]:
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert not [r for r, p in passwords.items() if p.encode() in data], path


def test_a_password_file_others_may_read_or_a_link_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "postgres.passwords.json"
    passwords, new = role_passwords(path, ROLES)
    assert new
    assert role_passwords(path, ROLES) == (passwords, False)
    path.chmod(0o640)
    with pytest.raises(StackError, match=r"only its owner may read.*delete it"):
        role_passwords(path, ROLES)
    path.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(StackError, match="cannot read the password file"):
        role_passwords(link, ROLES)


async def test_a_state_dir_made_with_trust_is_brought_to_passwords_keeping_its_data() -> None:
    pg = new_server("pg-auth-trust-")
    try:
        pg.start()
        pg.psql("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')", "agent")
        # Back to what an older dev stack left: trust rules, no passwords, no password file.
        pg.psql("; ".join(f"ALTER ROLE {role} PASSWORD NULL" for role in ROLES))
        pg.stop()
        (pg.data_dir / "pg_hba.conf").write_text(TRUST_HBA)
        pg.password_file.unlink()

        pg.start()

        for role in ROLES:
            with pytest.raises(asyncpg.InvalidPasswordError):
                await login(pg, role, None)
        for url, role in ((pg.url, "agent"), (pg.owner_url, "agent_owner")):
            conn = await asyncpg.connect(dsn(url))
            try:
                assert await conn.fetchval("SELECT current_user") == role
            finally:
                await conn.close()
        assert pg.psql("SELECT v FROM kept", "agent") == "still here"
        assert stat.S_IMODE(pg.password_file.stat().st_mode) == 0o600
    finally:
        pg.stop()
        shutil.rmtree(pg.data_dir.parent, ignore_errors=True)


@pytest.mark.parametrize("service", ["agentstate-db", "temporal-db"])
def test_compose_postgres_asks_every_login_for_a_password(service: str) -> None:
    env = env_of(service)
    assert env["POSTGRES_PASSWORD"]
    args = env["POSTGRES_INITDB_ARGS"].split()
    assert {"--auth-local=scram-sha-256", "--auth-host=scram-sha-256"} <= set(args)
    assert env["POSTGRES_HOST_AUTH_METHOD"] == "scram-sha-256"
    assert "trust" not in json.dumps(SERVICES[service])
