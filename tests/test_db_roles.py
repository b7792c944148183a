"""The AgentState database's roles: workers log in as a role that may only read and write
rows; the schema belongs to the owner role, which only migrations use (storage/roles.sql)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from durable_agents.workers.stack import PostgresServer, StackEndpoints
from durable_agents.workers.stack.postgres import ROLES_SQL, pg_bin_dir
from tests.test_compose import env_of

REFUSED = [
    "CREATE DATABASE refused_db",
    "CREATE ROLE refused_role",
    "CREATE TABLE refused_table (x int)",
    "CREATE TEMP TABLE refused_temp (x int)",
    "CREATE SCHEMA refused_schema",
    "DROP TABLE items",
    "ALTER TABLE items ADD COLUMN refused int",
    "TRUNCATE items",
    "CREATE INDEX refused_index ON items (kind)",
]


def dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@pytest.fixture
async def as_app(migrated: StackEndpoints) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(dsn(migrated.database_url))
    try:
        yield conn
    finally:
        await conn.close()


async def test_app_role_is_no_superuser_and_creates_no_database_role_or_table(
    as_app: asyncpg.Connection,
) -> None:
    flags = await as_app.fetchrow(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls FROM pg_roles"
        " WHERE rolname = current_user"
    )
    assert tuple(flags) == (False, False, False, False)
    for sql in REFUSED:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await as_app.execute(sql)


async def test_the_owner_owns_every_table_and_the_app_role_may_use_their_rows(
    migrated: StackEndpoints, as_app: asyncpg.Connection
) -> None:
    rows = await as_app.fetch(
        "SELECT c.relname, pg_get_userbyid(c.relowner) AS owner, c.relkind,"
        " has_table_privilege(c.oid, 'SELECT,INSERT,UPDATE,DELETE') AS dml,"
        " has_table_privilege(c.oid, 'TRUNCATE') AS truncate,"
        " c.relkind <> 'S' OR has_sequence_privilege(c.oid, 'USAGE,SELECT') AS seq"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'S')"
    )
    tables = {r["relname"] for r in rows if r["relkind"] != "S"}
    assert {"sessions", "items", "alembic_version"} <= tables
    assert {r["owner"] for r in rows} == {"agent_owner"}
    assert all(r["dml"] and not r["truncate"] and r["seq"] for r in rows)
    assert await as_app.fetchval("SELECT current_user") == "agent"


async def test_a_later_migrations_table_is_open_to_the_app_role_by_default(
    migrated: StackEndpoints, as_app: asyncpg.Connection
) -> None:
    table = f"probe_{uuid.uuid4().hex[:8]}"
    owner = await asyncpg.connect(dsn(migrated.database_migration_url))
    try:
        await owner.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, v text)")
        new_id = await as_app.fetchval(f"INSERT INTO {table} (v) VALUES ('a') RETURNING id")
        await as_app.execute(f"UPDATE {table} SET v = 'b' WHERE id = $1", new_id)
        assert await as_app.fetchval(f"SELECT v FROM {table}") == "b"
        assert await as_app.execute(f"DELETE FROM {table}") == "DELETE 1"
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await as_app.execute(f"DROP TABLE {table}")
    finally:
        await owner.execute(f"DROP TABLE IF EXISTS {table}")
        await owner.close()


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    """A cluster of our own: these tests change roles, which are cluster-wide."""
    state = Path(tempfile.mkdtemp(prefix="pg-roles-"))
    state.chmod(0o755)  # as root, postgres runs as an unprivileged user who must enter it
    pg = PostgresServer(state / "postgres", port=0, fsync=False)
    try:
        pg.start()
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(state, ignore_errors=True)


def test_a_stack_made_before_the_roles_is_brought_to_them_on_start(
    server: PostgresServer,
) -> None:
    # What older dev stacks made: the app role with CREATEDB, owning database and tables.
    server.psql("ALTER ROLE agent CREATEDB")
    server.psql("ALTER DATABASE agent OWNER TO agent")
    legacy = "CREATE TABLE legacy (id serial PRIMARY KEY); ALTER TABLE legacy OWNER TO agent"
    server.psql(legacy, database="agent")

    server.stop()
    server.start()

    assert server.psql("SELECT rolcreatedb FROM pg_roles WHERE rolname = 'agent'") == "f"
    owners = "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'agent'"
    assert server.psql(owners) == "agent_owner"
    checks = (
        "SELECT tableowner, has_table_privilege('agent', 'legacy', 'SELECT,INSERT,UPDATE,DELETE'),"
        " has_table_privilege('agent', 'legacy', 'TRUNCATE'),"
        " has_sequence_privilege('agent', 'legacy_id_seq', 'USAGE')"
        " FROM pg_tables WHERE tablename = 'legacy'"
    )
    assert server.psql(checks, database="agent") == "agent_owner|t|f|t"


async def test_compose_init_script_makes_the_roles_compose_logs_in_with(
    server: PostgresServer,
) -> None:
    """storage/roles.sql run as the postgres image's entrypoint runs initdb scripts, with
    agentstate-db's environment from docker-compose.yml."""
    server.psql("DROP DATABASE IF EXISTS compose_agent WITH (FORCE)")
    server.psql("CREATE DATABASE compose_agent")  # the entrypoint's POSTGRES_DB
    env = {**os.environ, **env_of("agentstate-db")}
    # The entrypoint runs its init scripts with PGPASSWORD set to POSTGRES_PASSWORD.
    env.update(PGHOST="127.0.0.1", PGPORT=str(server.port), PGPASSWORD=server.password("postgres"))
    entrypoint = [str(pg_bin_dir() / "psql"), "-v", "ON_ERROR_STOP=1", "--username", "postgres"]
    entrypoint += ["--no-password", "--no-psqlrc", "--dbname", "compose_agent"]
    argv = [*entrypoint, "-f", str(ROLES_SQL)]
    done = await asyncio.to_thread(subprocess.run, argv, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()

    app, owner = env["AGENTSTATE_APP_ROLE"], env["AGENTSTATE_OWNER_ROLE"]
    app_password, owner_password = env["AGENTSTATE_APP_PASSWORD"], env["AGENTSTATE_OWNER_PASSWORD"]
    base = f"postgresql://{{}}:{{}}@127.0.0.1:{server.port}/compose_agent"
    as_owner = await asyncpg.connect(base.format(owner, owner_password))
    as_app = await asyncpg.connect(base.format(app, app_password))
    try:
        await as_owner.execute("CREATE TABLE migrated (id bigserial PRIMARY KEY)")
        assert await as_app.fetchval("INSERT INTO migrated DEFAULT VALUES RETURNING id") == 1
        for sql in REFUSED:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await as_app.execute(sql.replace("items", "migrated"))
    finally:
        await as_app.close()
        await as_owner.close()
    with_password = f"SELECT count(*) FROM pg_authid WHERE rolname IN ('{app}', '{owner}')"
    assert server.psql(f"{with_password} AND rolpassword IS NOT NULL") == "2"
