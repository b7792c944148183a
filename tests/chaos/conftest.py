"""A stack of its own for the chaos tests: they stop and restart its services (and kill
workers), so the session stack the rest of the suite uses is never disturbed."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest
from _pytest.terminal import TerminalReporter
from temporalio.client import Client

from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.db import migrate
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.resources import Resources, open_resources
from durable_agents.workers.stack import DevStack, StackEndpoints
from durable_agents.workers.temporal_client import connect_client
from tests.support.chaos import SUMMARIES, write_summaries

LAST_RUN = Path(__file__).with_name(".last_run.txt")


@pytest.fixture(scope="package")
def chaos_devstack() -> Iterator[DevStack]:
    # Not under pytest's 0700 tmp: as root, PostgreSQL runs as an unprivileged user.
    state = Path(tempfile.mkdtemp(prefix="durable-agents-chaos-"))
    state.chmod(0o755)
    devstack = DevStack(state, temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    devstack.start()
    try:
        yield devstack
    finally:
        devstack.stop()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="package")
async def chaos_stack(chaos_devstack: DevStack) -> StackEndpoints:
    await migrate(chaos_devstack.endpoints.database_migration_url)
    return chaos_devstack.endpoints


@pytest.fixture(scope="package")
async def chaos_resources(chaos_stack: StackEndpoints) -> AsyncIterator[Resources]:
    s = chaos_stack.settings(workspace=Path("unused"), task_queue="unused", provider="scripted")
    async with open_resources(s.database, s.s3) as res:
        await res.store.ensure_bucket()
        yield res


@pytest.fixture(scope="package")
async def chaos_client(chaos_stack: StackEndpoints) -> Client:
    return await connect_client(chaos_stack.temporal_address, "default")


@pytest.fixture
def tenant() -> str:
    return f"chaos-{uuid.uuid4().hex[:10]}"


class ChaosRunner(Protocol):
    def __call__(
        self, provider: ModelProvider, workspace: Path, **agent: Any
    ) -> AbstractAsyncContextManager[str]: ...


@pytest.fixture
def chaos_worker(
    chaos_client: Client, chaos_resources: Resources, chaos_stack: StackEndpoints
) -> ChaosRunner:
    """An in-process cloud worker on the chaos stack, on a fresh task queue; keyword
    arguments override AgentSettings (fetch_max_bytes, ...)."""

    @asynccontextmanager
    async def run(provider: ModelProvider, workspace: Path, **agent: Any) -> AsyncIterator[str]:
        queue = f"chaos-{uuid.uuid4().hex[:10]}"
        settings = chaos_stack.settings(workspace=workspace, task_queue=queue, provider="scripted")
        if agent:
            settings.agent = settings.agent.model_copy(update=agent)
        acts = cloud_activities(settings, chaos_resources, provider, default_registry())
        worker = build_cloud_worker(chaos_client, acts, task_queue=queue, max_cached_workflows=0)
        async with running(worker):
            yield queue

    return run


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """One line per chaos scenario, shown without -s and kept in tests/chaos/.last_run.txt."""
    if not SUMMARIES:
        return
    terminalreporter.section("chaos summary")
    for line in SUMMARIES:
        terminalreporter.write_line(line)
    write_summaries(LAST_RUN)
