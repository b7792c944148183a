"""The embedded dev stack: Temporal, PostgreSQL and S3 (SeaweedFS) on loopback, no Docker.

Used by `agentctl dev up` and by the pytest fixtures. Layout of state_dir:
postgres/ (cluster), postgres.passwords.json (0600: the roles' passwords, pg_auth),
s3/ (weed data), temporal.db, logs/; `dev up` adds env (0600: the settings, for a shell).
Started as root, PostgreSQL and SeaweedFS run as users of their own and Temporal as root,
each service's files private to its user, none of them the tool user (roles.py).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol

from pydantic import SecretStr

from durable_agents.workers.settings import (
    DEV_POSTGRES_PORT,
    DEV_S3_ACCESS_KEY,
    DEV_S3_PORT,
    DEV_S3_SECRET_KEY,
    DEV_TEMPORAL_PORT,
    AgentSettings,
    DatabaseSettings,
    ModelSettings,
    S3Settings,
    Settings,
)
from durable_agents.workers.stack.errors import PortInUseError, StackError
from durable_agents.workers.stack.ports import free_port, reserve_ports
from durable_agents.workers.stack.postgres import PostgresServer
from durable_agents.workers.stack.roles import shared_user_warning
from durable_agents.workers.stack.seaweed import DEFAULT_BUCKET, SeaweedServer
from durable_agents.workers.stack.temporal import TemporalDevServer

__all__ = [
    "DEFAULT_BUCKET",
    "DevStack",
    "PortInUseError",
    "PostgresServer",
    "SeaweedServer",
    "StackEndpoints",
    "StackError",
    "TemporalDevServer",
    "free_port",
    "reserve_ports",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StackEndpoints:
    """Where a running stack's services are, and how to log in."""

    temporal_address: str
    # The least-privilege app role: workers, gateway, repositories. Both URLs carry the
    # role's password (the state dir's postgres.passwords.json), so no repr shows them.
    database_url: str = field(repr=False)
    database_migration_url: str = field(repr=False)  # the owner role: migrations only
    s3_endpoint_url: str
    s3_access_key_id: str
    s3_secret_access_key: str = field(repr=False)
    s3_bucket: str
    temporal_ui_url: str | None = None

    def env(self) -> dict[str, str]:
        """The environment variables that point the settings at this stack."""
        return {
            "TEMPORAL_ADDRESS": self.temporal_address,
            "TEMPORAL_NAMESPACE": "default",
            "DATABASE_URL": self.database_url,
            "DATABASE_MIGRATION_URL": self.database_migration_url,
            "S3_ENDPOINT_URL": self.s3_endpoint_url,
            "S3_ACCESS_KEY_ID": self.s3_access_key_id,
            "S3_SECRET_ACCESS_KEY": self.s3_secret_access_key,
            "S3_BUCKET": self.s3_bucket,
        }

    def settings(self, *, workspace: Path, task_queue: str, provider: str) -> Settings:
        """Settings pointing a worker in this process at this stack."""
        return Settings(
            database=DatabaseSettings(
                url=SecretStr(self.database_url),
                migration_url=SecretStr(self.database_migration_url),
            ),
            s3=S3Settings(
                endpoint_url=self.s3_endpoint_url,
                access_key_id=SecretStr(self.s3_access_key_id),
                secret_access_key=SecretStr(self.s3_secret_access_key),
                bucket=self.s3_bucket,
            ),
            model=ModelSettings.model_validate({"provider": provider, "name": provider}),
            agent=AgentSettings(workspace=workspace, task_queue=task_queue),
        )


class _Service(Protocol):
    def check_ports(self) -> None: ...
    def start(self) -> None: ...
    def stop(self, *, now: bool = False) -> None: ...


_STOPPED = "dev stack: stopped while starting"


class DevStack:
    """Temporal + PostgreSQL + S3 under one state dir; a port of 0 means any free port.
    `temporal=False` starts PostgreSQL and S3 alone (AgentState without a loop: the storage
    tests); its endpoints then name no Temporal address.

    One start, one stop: stop() may come from another thread at any time, a start still
    under way included, and nothing runs after it returns.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        temporal_port: int = DEV_TEMPORAL_PORT,
        postgres_port: int = DEV_POSTGRES_PORT,
        s3_port: int = DEV_S3_PORT,
        ui: bool = False,
        fsync: bool = True,
        s3_access_key: str = DEV_S3_ACCESS_KEY,
        s3_secret_key: str = DEV_S3_SECRET_KEY,
        bucket: str = DEFAULT_BUCKET,
        temporal: bool = True,
    ) -> None:
        self.state_dir = state_dir.absolute()
        logs = self.state_dir / "logs"
        self.postgres = PostgresServer(
            self.state_dir / "postgres",
            port=postgres_port,
            fsync=fsync,
            log_path=logs / "postgres.log",
        )
        self.seaweed = SeaweedServer(
            self.state_dir / "s3",
            port=s3_port,
            access_key=s3_access_key,
            secret_key=s3_secret_key,
            bucket=bucket,
            log_path=logs / "seaweed.log",
        )
        self.temporal = TemporalDevServer(
            self.state_dir / "temporal.db",
            port=temporal_port,
            headless=not ui,
            log_path=logs / "temporal.log",
            fsync=fsync,
        )
        self._services: list[_Service] = [self.postgres, self.seaweed]
        if temporal:
            self._services.append(self.temporal)
        self._endpoints: StackEndpoints | None = None
        self._stopped = threading.Event()
        self._starting = threading.Lock()  # held for the whole of start()

    @property
    def endpoints(self) -> StackEndpoints:
        """The endpoints of the running stack; StackError before start()."""
        if self._endpoints is None:
            raise StackError("dev stack is not running")
        return self._endpoints

    def start(self) -> StackEndpoints:
        """Start all three services in parallel; on any failure stop them all and raise.
        StackError when stop() came first or meanwhile."""
        with self._starting:
            return self._start()

    def _start(self) -> StackEndpoints:
        began = time.monotonic()
        if self._stopped.is_set():
            raise StackError(_STOPPED)
        # Every port up front, so a taken one fails before anything is launched.
        for service in self._services:
            service.check_ports()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        if (warning := shared_user_warning()) is not None:
            logger.warning(warning)
        with ThreadPoolExecutor(len(self._services), thread_name_prefix="devstack") as pool:
            futures = [pool.submit(self._start_one, service) for service in self._services]
            errors = [exc for f in futures if (exc := f.exception()) is not None]
        if self._stopped.is_set():
            errors.insert(0, StackError(_STOPPED))
        if errors:
            self._stop_services()
            for extra in errors[1:]:
                logger.error("dev stack: another service failed too: %s", extra)
            raise errors[0]
        self._endpoints = StackEndpoints(
            temporal_address=self.temporal.address if self.temporal in self._services else "",
            database_url=self.postgres.url,
            database_migration_url=self.postgres.owner_url,
            s3_endpoint_url=self.seaweed.endpoint_url,
            s3_access_key_id=self.seaweed.access_key,
            s3_secret_access_key=self.seaweed.secret_key,
            s3_bucket=self.seaweed.bucket,
            temporal_ui_url=self.temporal.ui_url if self.temporal in self._services else None,
        )
        logger.info("dev stack up in %.2fs (state in %s)", time.monotonic() - began, self.state_dir)
        return self._endpoints

    def _start_one(self, service: _Service) -> None:
        if self._stopped.is_set():
            raise StackError(_STOPPED)
        service.start()

    def stop(self, *, now: bool = False) -> None:
        """Stop every service, also after a failed start or during one (from another
        thread; it waits for that start to give up); errors are logged, not raised.
        now: kill rather than shut down (PostgreSQL recovers on its next start)."""
        began = time.monotonic()
        self._stopped.set()
        # A start under way may launch a service after any one pass: stop (quietly: a
        # service half started may refuse) until it gave up, its waits ending as soon as
        # their process is gone; then once more.
        if not self._starting.acquire(blocking=False):
            self._stop_services(now=now, quiet=True)
            while not self._starting.acquire(timeout=0.5):
                self._stop_services(now=now, quiet=True)
        self._starting.release()
        self._stop_services(now=now)
        self._endpoints = None
        logger.info("dev stack stopped in %.2fs", time.monotonic() - began)

    def _stop_services(self, *, now: bool = False, quiet: bool = False) -> None:
        with ThreadPoolExecutor(len(self._services), thread_name_prefix="devstack") as pool:
            futures = [pool.submit(service.stop, now=now) for service in self._services]
        for future in futures:
            if (exc := future.exception()) is not None:
                logger.log(
                    logging.DEBUG if quiet else logging.ERROR, "dev stack: stop failed: %s", exc
                )

    def __enter__(self) -> StackEndpoints:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
