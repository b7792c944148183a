"""Worker Deployment Versioning for the cloud worker (AGENT_DEPLOYMENT_NAME, AGENT_BUILD_ID,
AGENT_VERSIONING_BEHAVIOR; docs/DEPLOY.md): the settings, and a versioned worker on the
real dev server, whose runs record its version and behaviour. The page's `temporal worker
deployment` commands are what makes the version ramp and then current here, run with the
Temporal CLI (the devstack extra's) against the dev server, naming this test's deployment."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.api.enums.v1 import VersioningBehavior as ApiBehavior
from temporalio.client import Client
from temporalio.common import VersioningBehavior

from durable_agents.workers.process.cloud import build_cloud_worker, deployment_config, running
from durable_agents.workers.settings import AgentSettings
from durable_agents.workflows.contracts import GcInput
from durable_agents.workflows.gc import ArtifactGcWorkflow
from tests.support.doc_blocks import doc_block

TEMPORAL = Path(sys.executable).parent / "temporal"


def deployment_commands(name: str, build: str) -> dict[str, list[str]]:
    """docs/DEPLOY.md's `temporal worker deployment` commands by verb, naming `name` and
    `build` where the page names its example deployment and build."""
    block = doc_block("docs/DEPLOY.md", "temporal worker deployment set-current-version")
    values = {"agents": name, "3f9c2e1": build}
    commands = {}
    for line in block.text.splitlines():
        argv = [values.get(a, a) for a in shlex.split(line)]
        assert argv[:3] == ["temporal", "worker", "deployment"] and name in argv, line
        commands[argv[3]] = [str(TEMPORAL), *argv[1:]]
    assert list(commands) == ["set-current-version", "set-ramping-version", "describe"]
    return commands


async def temporal(client: Client, argv: list[str]) -> tuple[int, str]:
    """The Temporal CLI against the client's server; a confirmation it asks for is given."""
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "TEMPORAL_NAMESPACE": client.namespace,
    }
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(b"y\n"), 30)
    return await proc.wait(), out.decode()


def test_unset_means_an_unversioned_worker() -> None:
    assert deployment_config(AgentSettings()) is None


def test_both_set_give_a_versioned_worker_that_auto_upgrades_by_default() -> None:
    config = deployment_config(AgentSettings(deployment_name="agents", build_id="abc123"))
    assert config is not None and config.use_worker_versioning
    assert config.version.to_canonical_string() == "agents.abc123"
    assert config.default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE
    pinned = AgentSettings(deployment_name="agents", build_id="b", versioning_behavior="pinned")
    assert deployment_config(pinned).default_versioning_behavior == VersioningBehavior.PINNED  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"deployment_name": "agents"}, "AGENT_DEPLOYMENT_NAME and AGENT_BUILD_ID"),
        ({"build_id": "abc"}, "AGENT_DEPLOYMENT_NAME and AGENT_BUILD_ID"),
        ({"deployment_name": "a.b", "build_id": "c"}, "must not contain '.'"),
        ({"deployment_name": "a", "build_id": "c", "versioning_behavior": "sticky"}, "pinned"),
    ],
)
def test_half_or_malformed_versioning_settings_are_refused(
    given: dict[str, str], words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in given.items():
        monkeypatch.setenv(f"AGENT_{key.upper()}", value)
    with pytest.raises(ValidationError, match=words):
        AgentSettings()


async def test_a_versioned_worker_serves_once_current_and_its_runs_record_the_version(
    client: Client,
) -> None:
    queue = f"versioned-{uuid.uuid4().hex[:10]}"
    name, build = f"agents-{uuid.uuid4().hex[:8]}", "build-1"
    config = deployment_config(AgentSettings(deployment_name=name, build_id=build))
    worker = build_cloud_worker(client, [], task_queue=queue, deployment=config)
    async with running(worker):
        # The version exists once its worker has polled; until it is made current (or
        # ramping) no run on its queue is handed to it.
        commands = deployment_commands(name, build)
        async with asyncio.timeout(30):
            while True:
                code, out = await temporal(client, commands["set-ramping-version"])
                if code == 0:
                    break
                await asyncio.sleep(0.2)
        code, out = await temporal(client, commands["set-current-version"])
        assert code == 0, out
        code, out = await temporal(client, commands["describe"])
        assert code == 0 and build in out, out
        handle = await client.start_workflow(
            ArtifactGcWorkflow.run, GcInput(), id=f"gc-{queue}", task_queue=queue
        )
        async with asyncio.timeout(30):
            while True:
                events = (await handle.fetch_history()).events
                done = [e for e in events if e.HasField("workflow_task_completed_event_attributes")]
                if done:
                    break
                await asyncio.sleep(0.1)
        await handle.terminate()
    attrs = done[0].workflow_task_completed_event_attributes
    assert (attrs.deployment_version.deployment_name, attrs.deployment_version.build_id) == (
        name,
        build,
    )
    assert attrs.versioning_behavior == ApiBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
