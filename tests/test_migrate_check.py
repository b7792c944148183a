"""`agentctl migrate --check [--wait]`, what holds a worker or gateway pod (its init
container, workers/deploy/k8s/) until the migration has run: against a scratch database of
the test stack, as the workers' role, before and after the migration. docs/DEPLOY.md's
three commands run here as written, each as the role its comment names."""

from __future__ import annotations

import asyncio
import shlex
import socket
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from durable_agents.storage.db import migrate
from durable_agents.workers.settings import get_settings
from durable_agents.workers.stack import DevStack
from tests.support.doc_blocks import doc_block
from tests.support.helpers import agentctl

BEFORE = "AgentState schema at no migration lacks"
READY = "every migration of this code has run"


@pytest.fixture
async def owner_url(devstack: DevStack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """A new empty database with the stack's two roles; DATABASE_URL is its app role's URL,
    and the owner's (which migrates it) is what this yields."""
    name = f"migrate_check_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DATABASE_URL", devstack.postgres.create_database(name))
    get_settings.cache_clear()
    try:
        yield devstack.postgres.url_for(name, role=devstack.postgres.owner)
    finally:
        get_settings.cache_clear()
        devstack.postgres.psql(f'DROP DATABASE "{name}" WITH (FORCE)')


async def _stamp(owner_url: str, revision: str) -> None:
    """Set the revision the database says it is at, as if another release had migrated it."""
    conn = await asyncpg.connect(owner_url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        await conn.execute("UPDATE alembic_version SET version_num = $1", revision)
    finally:
        await conn.close()


def documented() -> list[list[str]]:
    """docs/DEPLOY.md's commands: migrate, check, check and wait (agentctl's arguments)."""
    block = doc_block("docs/DEPLOY.md", "agentctl migrate    ")
    argvs = [shlex.split(line, comments=True) for line in block.text.splitlines()]
    assert [argv[0] for argv in argvs] == ["agentctl"] * 3
    return [argv[1:] for argv in argvs]


async def test_check_fails_until_the_migration_has_run_and_passes_after(
    owner_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    apply, check, wait = documented()
    code, _, err = await agentctl(capsys, *check)  # as DATABASE_URL, the workers' role
    assert code == 1 and BEFORE in err, err
    monkeypatch.setenv("DATABASE_MIGRATION_URL", owner_url)
    get_settings.cache_clear()
    code, out, err = await agentctl(capsys, *apply)
    assert code == 0, out + err
    for argv in (check, wait):  # passes at once: the wait only repeats a failing check
        code, out, _ = await agentctl(capsys, *argv)
        assert code == 0 and READY in out, out
    await _stamp(owner_url, "0001")  # a database one release behind this code
    code, _, err = await agentctl(capsys, "migrate", "--check")
    assert code == 1 and "AgentState schema at 0001 lacks" in err, err


async def test_check_passes_on_a_schema_a_later_release_migrated(
    owner_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Migrations only add, so an older image runs on a newer schema: a rollback is not held."""
    await migrate(owner_url)
    await _stamp(owner_url, "9999_later_release")
    code, out, _ = await agentctl(capsys, "migrate", "--check")
    assert code == 0 and "at 9999_later_release" in out, out


async def test_wait_returns_once_the_migration_has_run(
    owner_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = asyncio.create_task(agentctl(capsys, "migrate", "--check", "--wait", "60s"))
    await asyncio.sleep(3)  # it checks, finds nothing, and checks again
    assert not waiting.done()
    await migrate(owner_url)
    code, out, _ = await asyncio.wait_for(waiting, timeout=30)
    assert code == 0, out
    assert f"waiting: {BEFORE}" in out and READY in out, out


async def test_wait_gives_up_after_its_duration_with_the_last_reason(
    owner_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    code, out, err = await agentctl(capsys, "migrate", "--check", "--wait", "3s")
    assert code == 1 and 3 <= time.monotonic() - began < 15
    assert f"waiting: {BEFORE}" in out, out  # each check but the last, with the reason
    assert err.startswith(f"error: {BEFORE}"), err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_wait_outlasts_an_unreachable_database_and_never_shows_its_password(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hunter2-secret"
    url = f"postgresql+asyncpg://agent:{secret}@127.0.0.1:{_closed_port()}/agent"
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        code, out, err = await agentctl(capsys, "migrate", "--check", "--wait", "2s")
    finally:
        get_settings.cache_clear()
    assert code == 1
    assert "waiting: cannot reach PostgreSQL at 127.0.0.1:" in out, out
    assert err.startswith("error: cannot reach PostgreSQL"), err
    assert secret not in out + err


@pytest.mark.parametrize(
    "args", [["--wait", "15m"], ["--check", "--wait", "soon"], ["--check", "--wait", "0x"]]
)
async def test_wait_is_refused_without_check_or_a_duration(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = await agentctl(capsys, "migrate", *args)
    assert code == 2 and "--wait" in err, err
