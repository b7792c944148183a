"""A process beside `agentctl dev up` or anywhere else finds the running stack's variables in
the 0600 env files dev up writes (./.devstack/env, else the per-user record), and a variable
actually set still wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable_agents.workers.settings import DatabaseSettings, S3Settings
from tests.support.dev_env import StackFiles, isolated_stack_files

URL = "postgresql+asyncpg://agent:generated@127.0.0.1:54329/agent"


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StackFiles:
    return isolated_stack_files(tmp_path, monkeypatch)


def test_the_dev_stacks_env_file_supplies_the_database_urls(
    files: StackFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    files.write(files.cwd_file, {"DATABASE_URL": URL})
    assert DatabaseSettings().url.get_secret_value() == URL
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://agent:set@db/agent")
    assert DatabaseSettings().url.get_secret_value().endswith(":set@db/agent")


def test_the_user_record_supplies_the_database_and_s3_from_any_directory(
    files: StackFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    files.write(
        files.user_file,
        {
            "DATABASE_URL": URL,
            "DATABASE_MIGRATION_URL": URL.replace("agent:", "agent_owner:"),
            "S3_ENDPOINT_URL": "http://127.0.0.1:40001",
            "S3_SECRET_ACCESS_KEY": "from-the-record",
            "S3_BUCKET": "recorded-bucket",
        },
    )
    database, s3 = DatabaseSettings(), S3Settings()
    assert database.url.get_secret_value() == URL
    assert database.migration_url.get_secret_value().startswith("postgresql+asyncpg://agent_owner:")
    assert s3.endpoint_url == "http://127.0.0.1:40001"
    assert s3.secret_access_key.get_secret_value() == "from-the-record"
    assert s3.bucket == "recorded-bucket"
    monkeypatch.setenv("S3_BUCKET", "set")
    assert S3Settings().bucket == "set"
    # Arguments (a stack's own settings, StackEndpoints.settings) come first.
    assert S3Settings(bucket="given").bucket == "given"
