"""Device presence: the repository, real `agentctl device` processes that register and
heartbeat, a device killed mid-call, a device that never comes, and two `agentctl watch`."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest
from sqlalchemy import func, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.device_presence import DevicePresenceActivities
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import WORKFLOW_TOOLS, default_registry
from durable_agents.storage.device_models import DeviceRow
from durable_agents.storage.devices import DeviceRepository
from durable_agents.workers.process import run as processes
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.contracts import DevicePresenceInput
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.blocking import (
    artifact_commit_held,
    wait_until_commit_blocked,
    write_file_result_sha,
)
from tests.support.helpers import (
    items_of,
    register_device,
    session_root,
    start,
    wait_for_pending,
)
from tests.support.processes import AGENTCTL, DeviceProcess

REPORT = "out/device.md"
CONTENT = "# Written on the device\n\nonce, whatever happens to the device\n"
SECONDS_30 = timedelta(seconds=30)


async def online(
    res: Resources, tenant: str, device_id: str, within: timedelta = SECONDS_30
) -> bool:
    async with res.sessions() as db:
        return await DeviceRepository(db, tenant).is_online(device_id, within)


async def until(check: Callable[[], Awaitable[bool]], within: float = 20) -> None:
    """Poll `check` until it holds; state in another process cannot set an Event here."""
    async with asyncio.timeout(within):
        while True:
            if await check():
                return
            await asyncio.sleep(0.1)


async def backdate(res: Resources, tenant: str, device_id: str, seconds: float) -> None:
    """Make the device last seen `seconds` ago by the database clock."""
    async with res.sessions() as db, db.begin():
        await db.execute(
            update(DeviceRow)
            .where(DeviceRow.tenant_id == tenant, DeviceRow.device_id == device_id)
            .values(
                last_seen_at=func.now() - timedelta(seconds=seconds),
                registered_at=func.now() - timedelta(seconds=seconds),
            )
        )


# -- the repository ---------------------------------------------------------------------------


async def test_register_heartbeat_and_the_online_window(resources: Resources, tenant: str) -> None:
    async with resources.sessions() as db, db.begin():
        repo = DeviceRepository(db, tenant)
        assert not await repo.heartbeat("laptop"), "an unknown device cannot heartbeat"
        assert await repo.get("laptop") is None
        await repo.register("laptop", ["read_file"])
        assert await repo.is_online("laptop", SECONDS_30)
    await backdate(resources, tenant, "laptop", 60)
    async with resources.sessions() as db, db.begin():
        repo = DeviceRepository(db, tenant)
        assert not await repo.is_online("laptop", SECONDS_30)
        assert await repo.is_online("laptop", timedelta(seconds=90))
        assert await repo.online_ids(SECONDS_30) == set()
        assert await repo.heartbeat("laptop")
        assert await repo.is_online("laptop", SECONDS_30)
        assert await repo.online_ids(SECONDS_30) == {"laptop"}
    await backdate(resources, tenant, "laptop", 60)
    async with resources.sessions() as db, db.begin():
        repo = DeviceRepository(db, tenant)
        row = await repo.register("laptop", ["read_file", "write_file"])
        assert row.tools == ["read_file", "write_file"], "re-registering replaces the tools"
        assert row.last_seen_at > row.registered_at, "and keeps the first registration time"
        assert [d.device_id for d in await repo.all()] == ["laptop"]


async def test_devices_are_scoped_by_tenant(resources: Resources, tenant: str) -> None:
    other = f"{tenant}-other"
    async with resources.sessions() as db, db.begin():
        await DeviceRepository(db, tenant).register("shared-name", ["read_file"])
        theirs = DeviceRepository(db, other)
        assert await theirs.get("shared-name") is None
        assert not await theirs.heartbeat("shared-name")
        assert not await theirs.is_online("shared-name", SECONDS_30)
        assert await theirs.all() == [] and await theirs.online_ids() == set()
        await theirs.register("shared-name", ["list_dir"])
        mine = await DeviceRepository(db, tenant).get("shared-name")
        assert mine is not None and mine.tools == ["read_file"]


@pytest.mark.parametrize("bad", ["", "a" * 65, "has space", "a/b", "dev\n", "ünï", "q:1"])
async def test_invalid_device_ids_are_refused(resources: Resources, tenant: str, bad: str) -> None:
    async with resources.sessions() as db:
        repo = DeviceRepository(db, tenant)
        for call in (
            repo.register(bad, []),
            repo.heartbeat(bad),
            repo.get(bad),
            repo.is_online(bad, SECONDS_30),
        ):
            with pytest.raises(ValueError, match="invalid device id"):
                await call
    with pytest.raises(ApplicationError) as err:
        await ActivityEnvironment().run(
            DevicePresenceActivities(resources.sessions).device_route,
            DevicePresenceInput(tenant, bad),
        )
    assert err.value.type == "InvalidDeviceId" and err.value.non_retryable


async def test_heartbeat_survives_a_database_error_and_re_registers(
    resources: Resources,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(processes, "DEVICE_HEARTBEAT_SECONDS", 0.05)
    calls = 0

    def flaky() -> AsyncSession:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("connection refused")  # as asyncpg raises with PostgreSQL away
        return resources.sessions()

    sessions = cast(async_sessionmaker[AsyncSession], flaky)
    beat = asyncio.create_task(processes._heartbeat(sessions, tenant, "flaky", ["read_file"]))
    try:
        # The row was never there: the beat after the failed one registers it.
        await until(lambda: online(resources, tenant, "flaky"), within=5)
        assert not beat.done(), "a failed beat must not end the heartbeat"
    finally:
        beat.cancel()
        await asyncio.gather(beat, return_exceptions=True)
    assert "heartbeat failed" in caplog.text


# -- real device processes ----------------------------------------------------------------------


def devices_cli(env: dict[str, str], tenant: str) -> str:
    """The `devices` command body run as `agentctl devices` would run it."""
    code = (
        "import typer; from durable_agents.workers.cli.devices import devices; typer.run(devices)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--tenant", tenant],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_device_worker_registers_heartbeats_and_stops_cleanly(
    resources: Resources, migrated: StackEndpoints, tmp_path: Path, tenant: str
) -> None:
    device = DeviceProcess(migrated, tenant, "desk-1", tmp_path, tmp_path / "device.log")
    device.start()
    try:
        await device.wait_serving(resources)
        async with resources.sessions() as db:
            row = await DeviceRepository(db, tenant).get("desk-1")
        assert row is not None and row.tools == sorted(
            set(default_registry().tools) - WORKFLOW_TOOLS
        )
        listing = devices_cli(device.env, tenant)
        assert re.search(r"desk-1 .*\byes\b", listing), listing
        # Seen a minute ago: offline until the next heartbeat, due within 5 s.
        await backdate(resources, tenant, "desk-1", 60)
        assert not await online(resources, tenant, "desk-1")
        await until(lambda: online(resources, tenant, "desk-1"), within=12)
    finally:
        code = device.stop()
    assert code == 0, device.log.read_text()[-2000:]
    await backdate(resources, tenant, "desk-1", 60)
    assert re.search(r"desk-1 .*\bno\b", devices_cli(device.env, tenant))


async def test_device_killed_mid_call_finishes_after_restart_and_writes_once(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    sid = uuid.uuid4()
    cloud = session_root(workspace, tenant, sid)
    (cloud / "cloud-only.txt").write_text("in the cloud workspace")
    first_sha = await write_file_result_sha(tmp_path / "scratch", REPORT, CONTENT)
    device = DeviceProcess(migrated, tenant, f"lid-{tenant}", laptop, tmp_path / "device.log")
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": REPORT, "content": CONTENT}},
                    {"name": "list_dir", "arguments": {"path": "."}},
                ]
            }
        ]
    )
    target = laptop / REPORT
    device.start()
    try:
        await device.wait_serving(resources)
        async with agent_worker(provider, workspace) as queue:
            # The device writes the file and uploads its result, then cannot commit: killed.
            async with artifact_commit_held(resources, tenant, first_sha):
                session_id, handle = await start(
                    client,
                    resources,
                    queue,
                    tenant=tenant,
                    session_id=sid,
                    device_id=device.device_id,
                    device_tools=["write_file"],
                    loosened_approvals={"write_file": "never"},
                    loosened_by="test",
                    tool_timeout_seconds=5,
                )
                await wait_until_commit_blocked(resources)
                first = os.stat(target)
                device.kill()
            # The device is down; the cloud-side call of the same turn is not held up by it.
            async with asyncio.timeout(20):
                while True:
                    results = [
                        i
                        for i in await items_of(resources, tenant, session_id)
                        if i.kind == "tool_result"
                    ]
                    if any(r.tool_name == "list_dir" for r in results):
                        break
                    await asyncio.sleep(0.1)
            assert [r.tool_name for r in results] == ["list_dir"]
            assert "cloud-only.txt" in results[0].text
            device.start()
            result = await asyncio.wait_for(handle.result(), 60)
    finally:
        device.stop()

    assert result.status == "completed"
    after = os.stat(target)
    assert (after.st_ino, after.st_mtime_ns) == (first.st_ino, first.st_mtime_ns), "written twice"
    assert target.read_text() == CONTENT
    assert not (cloud / REPORT).exists(), "write_file ran in the cloud, not on the device"
    items = await items_of(resources, tenant, session_id)
    results = [i for i in items if i.kind == "tool_result"]
    assert sorted((r.tool_call_id, r.tool_name) for r in results) == [
        ("call_0_0", "write_file"),
        ("call_0_1", "list_dir"),
    ], "one result per call"
    written = next(r for r in results if r.tool_name == "write_file")
    assert '"already_applied": true' in written.text, "the restarted device redid the write"
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) >= 2, "the device call was expected to be retried after the kill"


async def test_device_that_never_comes_is_reported_to_the_model_as_offline(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}]
    )
    # Registered once, long ago as far as presence goes: it never heartbeats.
    await register_device(resources, tenant, f"never-{tenant}", ["read_file"], seen_ago_s=3600)
    async with agent_worker(provider, workspace) as queue:
        _, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=f"never-{tenant}",
            device_tools=["read_file"],
            device_schedule_to_start_seconds=2,
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    # Step 1 ran while the call was pending; the step after the timeout reads it.
    told = [m.content for m in provider.requests[-1].messages if m.role == "tool"]
    assert len(told) == 1 and "DeviceOffline" in told[0], told


def watch(env: dict[str, str], session_id: str, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    # stderr apart: a warning in one watcher's output must not pass for a difference in items.
    with out.open("wb") as f, out.with_suffix(".err").open("wb") as err:
        return subprocess.Popen(
            [str(AGENTCTL), "watch", session_id, *extra], env=env, stdout=f, stderr=err
        )


async def test_two_watchers_print_the_same_items_and_the_end(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    env = {**os.environ, **migrated.env(), "AGENT_TENANT_ID": tenant}
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "A"}}]}]
    )
    early_out, late_out = tmp_path / "early.txt", tmp_path / "late.txt"
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        # The task waits for approval: running, with items already committed.
        call_id = (await wait_for_pending(client, session_id))[0]
        early = watch(env, session_id, early_out)
        await until(lambda: asyncio.to_thread(lambda: "call" in early_out.read_text()))
        late = watch(env, session_id, late_out, "--after", "0")
        await asyncio.sleep(0.5)
        await verbs.approve(
            client, session_id, call_id, "test", sessions=resources.sessions, tenant_id=tenant
        )
        await asyncio.wait_for(handle.result(), 30)
        codes = [await asyncio.to_thread(p.wait, 30) for p in (early, late)]

    early_lines, late_lines = early_out.read_text().splitlines(), late_out.read_text().splitlines()
    assert codes == [0, 0], early_lines + late_lines
    # Status changes are what each watcher's polls happened to see (a short `running` between
    # the approval and the end may fall between two polls); the items and the end may not.
    assert _items_and_end(early_lines) == _items_and_end(late_lines)
    assert early_lines[-1] == "task ended: completed (unchecked)"
    items = await items_of(resources, tenant, session_id)
    shown = [int(m[1]) for line in early_lines if (m := re.match(r"#(\d+) ", line))]
    assert shown == [i.ordinal for i in items] == list(range(1, len(items) + 1))
    assert [i.kind for i in items][-1] == "assistant_message"


def _items_and_end(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith(("status: ", "waiting_model: "))]
