"""A second terminal beside `agentctl dev up` finds the stack's database passwords in the
0600 env file dev up writes (.devstack/env), and a variable actually set still wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable_agents.workers.settings import DEV_ENV_FILE, DatabaseSettings

URL = "postgresql+asyncpg://agent:generated@127.0.0.1:54329/agent"


def test_the_dev_stacks_env_file_supplies_the_database_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / DEV_ENV_FILE).parent.mkdir()
    (tmp_path / DEV_ENV_FILE).write_text(f"# dev up\nexport DATABASE_URL='{URL}'\n")
    assert DatabaseSettings().url.get_secret_value() == URL
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://agent:set@db/agent")
    assert DatabaseSettings().url.get_secret_value().endswith(":set@db/agent")
