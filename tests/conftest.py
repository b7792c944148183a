"""Fixtures: one real stack per test session (Temporal dev server, PostgreSQL, SeaweedFS),
migrated once; each test gets its own task queue, workspace and tenant or session ids."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.agents import Agent
from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.db import migrate
from durable_agents.storage.partitioning import ENV_FLAG, partition_by_tenant
from durable_agents.storage.workspaces import WorkspaceScope
from durable_agents.workers.dev_env import STATE_HOME_ENV
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.resources import Resources, open_resources
from durable_agents.workers.settings import SandboxMode, get_settings
from durable_agents.workers.stack import DevStack, StackEndpoints
from durable_agents.workers.stack.temporal import TemporalDevServer
from durable_agents.workers.temporal_client import connect_client
from tests.support.tiers import guard_fast_tier, heaviest_files_first, mark_tiers


def pytest_configure(config: pytest.Config) -> None:
    """The run's own XDG_STATE_HOME, inherited by every process it starts: a `dev up` a test
    runs records its stack there (workers/dev_env.py), never in the user's ~/.local/state,
    and a stack the user runs meanwhile is no test's."""
    state_home = tempfile.mkdtemp(prefix="durable-agents-state-")
    config.add_cleanup(lambda: shutil.rmtree(state_home, ignore_errors=True))
    os.environ[STATE_HOME_ENV] = state_home


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it reads these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers services / processes / chaos / browser from each test's fixture closure
    (tests/support/tiers.py); `make test-fast` runs the tests with none of them. In an xdist
    worker, the heaviest files come first (with --no-loadscope-reorder, the order in which
    xdist hands the files out)."""
    mark_tiers(items)
    if hasattr(config, "workerinput"):
        heaviest_files_first(items)
    guard_fast_tier()


@pytest.fixture(scope="session")
def devstack() -> Iterator[DevStack]:
    """The session's PostgreSQL and S3, for the few tests that act as their operator (the
    PostgreSQL superuser creating a scratch database); others use `stack`, or `storage`
    when they need no Temporal. Temporal is `temporal_server`, started only for the tests
    that use it, so the storage tests run without it (`make test-storage`)."""
    # Not under pytest's 0700 tmp: as root, PostgreSQL runs as an unprivileged user.
    state = Path(tempfile.mkdtemp(prefix="durable-agents-test-"))
    state.chmod(0o755)
    devstack = DevStack(
        state, temporal_port=0, postgres_port=0, s3_port=0, fsync=False, temporal=False
    )
    try:
        devstack.start()
        yield devstack
    finally:
        devstack.stop()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="session")
def temporal_server(devstack: DevStack) -> Iterator[TemporalDevServer]:
    server = devstack.temporal  # the stack's own, under its state dir; started on first use
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def storage(devstack: DevStack) -> StackEndpoints:
    """PostgreSQL and S3 only: no Temporal address."""
    return devstack.endpoints


@pytest.fixture(scope="session")
def stack(devstack: DevStack, temporal_server: TemporalDevServer) -> StackEndpoints:
    return replace(devstack.endpoints, temporal_address=temporal_server.address)


@pytest.fixture(scope="session")
async def migrated_storage(storage: StackEndpoints) -> StackEndpoints:
    # As the owner; everything after (workers, repositories) uses the app role.
    await migrate(storage.database_migration_url)
    if os.environ.get(ENV_FLAG) == "1":  # make test-partitioned
        await partition_by_tenant(storage.database_migration_url)
    return storage


@pytest.fixture(scope="session")
async def migrated(stack: StackEndpoints, migrated_storage: StackEndpoints) -> StackEndpoints:
    return stack


@pytest.fixture(scope="session")
async def resources(
    migrated_storage: StackEndpoints, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Resources]:
    s = migrated_storage.settings(
        workspace=Path("unused"), task_queue="unused", provider="scripted"
    )
    async with open_resources(s.database, s.s3) as res:
        await res.store.ensure_bucket()
        yield res


@pytest.fixture(scope="session")
async def client(stack: StackEndpoints) -> Client:
    return await connect_client(stack.temporal_address, "default")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


AgentRunner = Callable[..., AbstractAsyncContextManager[str]]


@pytest.fixture
def agent_worker(client: Client, resources: Resources, migrated: StackEndpoints) -> AgentRunner:
    """Run a cloud worker with the given (fake) provider on a fresh task queue.

    `workspace` is the workspace base: each session's tools see
    `workspace/{tenant}/{session}` (tests.support.helpers.session_root), or the shared
    root of `workspace_scope`.

    max_cached_workflows=0 makes every workflow task replay the history from the start,
    so each test also checks the loop is deterministic. The sandbox is the shared one (our
    workflow modules imported once, as the production worker's `off` does, with the
    sandbox's builtins restrictions); `sandbox="strict"` re-imports them in every workflow
    task (~150 ms each), so a clock read or random draw in them fails at run time: the
    replay of every recorded history, an approval, a child, a continue-as-new and the
    sandbox's own tests run it (workers/process/sandbox.py says what each checks).
    """

    @asynccontextmanager
    async def run(
        provider: ModelProvider,
        workspace: Path,
        *,
        queue: str | None = None,
        system_prompt: str | None = None,
        registry: ToolRegistry | None = None,
        workspace_scope: WorkspaceScope = "session",
        agents: tuple[Agent, ...] = (),
        max_cached_workflows: int = 0,
        sandbox: SandboxMode = "shared",
        agent_settings: dict[str, Any] | None = None,
        **model: Any,
    ) -> AsyncIterator[str]:
        queue = queue or f"test-{uuid.uuid4().hex[:10]}"
        settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
        settings.agent = settings.agent.model_copy(update={"workspace_scope": workspace_scope})
        if model:
            settings.model = settings.model.model_copy(update=model)
        if system_prompt is not None:
            settings.agent = settings.agent.model_copy(update={"system_prompt": system_prompt})
        if agent_settings:
            settings.agent = settings.agent.model_copy(update=agent_settings)
        registry = registry or default_registry()
        acts = cloud_activities(settings, resources, provider, registry, agents=agents)
        worker = build_cloud_worker(
            client,
            acts,
            task_queue=queue,
            max_cached_workflows=max_cached_workflows,
            sandbox=sandbox,
            heartbeat_throttle_seconds=settings.agent.heartbeat_throttle_seconds,
        )
        async with running(worker):
            yield queue

    return run


@pytest.fixture
def cli_env(
    migrated: StackEndpoints, monkeypatch: pytest.MonkeyPatch, tenant: str
) -> Iterator[None]:
    """The environment an agentctl on another device would have, for in-process CLI calls."""
    for name, value in migrated.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AGENT_TENANT_ID", tenant)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
