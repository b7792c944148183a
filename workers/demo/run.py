"""`agentctl demo`: the whole product in one command on a throwaway embedded stack.

Start Temporal + PostgreSQL + SeaweedFS, run a cloud worker with the offline model (or, with
`--model local`, a real model served by llama.cpp on loopback) and the gateway, start a task
that reads the workspace and writes a report (which needs approval), follow it live through
the gateway's event stream (as `agentctl watch --gateway` does), then show the timeline,
verify every artifact against its sha256, say whether the task did what it was asked (the
report exists and names the workspace's files; exit status 1 if not) and stop everything.
Its state dir goes too, unless the demo failed or was stopped: then it is kept (database,
S3 data, every service's log, llama-server's included) and the demo says how to look at it.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from temporalio.client import Client

from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.providers.offline import REPORT_PATH, OfflineProvider
from durable_agents.activities.providers.tool_grammar import ToolMode
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.storage.db import migrate
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller, StartRequest
from durable_agents.workers.client.gateway_client import KEY_ENV, URL_ENV, Gateway
from durable_agents.workers.client.render import timeline_table
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.watch.follow_gateway import watch_via_gateway
from durable_agents.workers.client.watch.printer import WatchPrinter
from durable_agents.workers.demo import DEMO_WORKSPACE
from durable_agents.workers.demo.outcome import check_report, workspace_files
from durable_agents.workers.demo.survey import SURVEY_AGENT, survey_agent
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.process.cloud import (
    build_cloud_worker,
    cloud_activities,
    running,
    worker_slots,
)
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.resources import Resources, open_resources
from durable_agents.workers.settings import DEV_HEARTBEAT_THROTTLE_SECONDS
from durable_agents.workers.stack import DevStack
from durable_agents.workers.stack.llama import LlamaServer
from durable_agents.workers.stack.local_model import model_named
from durable_agents.workers.temporal_client import connect_client

DEMO_TASK = "Survey the files in this workspace and write a short report to out/report.md."
DEMO_QUEUE = "agent-demo"
TENANT = "default"
# The demo's API key: its tenant only, and short-lived (the stack is thrown away anyway).
DEMO_KEY_SCOPES = ("read", "start", "approve")
DEMO_KEY_TTL = timedelta(hours=1)


async def _decide_approvals(
    console: Console,
    service: TaskService,
    session_id: str,
    interactive: bool,
    done: asyncio.Event,
) -> None:
    caller = Caller.operator(TENANT, "demo-user")
    decided: set[str] = set()
    while not done.is_set():
        live = await service.live_status(caller, session_id)
        for pending in live.pending_approvals:
            if pending.tool_call_id in decided:
                continue
            decided.add(pending.tool_call_id)
            console.print(
                f"[bold yellow]approval needed[/]: {pending.name} "
                f"{escape('[' + pending.tool_call_id + ']')}"
            )
            ok = True
            if interactive:
                answer = await asyncio.to_thread(input, "  approve? [Y/n] ")
                ok = answer.strip().lower() not in ("n", "no")
            else:
                console.print(
                    "  [yellow]auto-approving[/] (not on a terminal; "
                    "`agentctl demo --interactive` asks instead)"
                )
            if ok:
                await service.approve(caller, session_id, pending.tool_call_id)
            else:
                await service.reject(
                    caller, session_id, pending.tool_call_id, "declined in the demo"
                )
        await asyncio.sleep(0.3)


async def _follow(console: Console, gateway: Gateway, session_id: str, done: asyncio.Event) -> None:
    try:
        with WatchPrinter(console) as printer:
            await watch_via_gateway(gateway, session_id, printer)
    except SystemExit:
        # rich's answer to a closed stdout (`agentctl demo | head`): raised in this task it
        # would stop the event loop mid-step and strand the stack; the main task meets the
        # closed pipe next and exits with everything stopped.
        pass
    finally:
        done.set()


async def _demo_key(res: Resources) -> str:
    async with res.sessions() as db, db.begin():
        new = await ApiKeyRepository(db).create(
            TENANT,
            "demo-user",
            DEMO_KEY_SCOPES,
            name="demo",
            expires_at=datetime.now(UTC) + DEMO_KEY_TTL,
        )
    return new.key


def _announce_gateway(console: Console, gateway: Gateway) -> None:
    console.print(
        f"  gateway on {gateway.url} (web page: {gateway.url}/, "
        f"API schema: {gateway.url}/openapi.json)",
        highlight=False,
        soft_wrap=True,
    )
    if console.is_terminal:
        # Shown once, on the terminal only: never into a log or a CI transcript.
        console.print(
            f"  demo API key, to sign in to the page (tenant {TENANT}; "
            f"{', '.join(DEMO_KEY_SCOPES)}; expires in 1 h): {gateway.api_key}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print("  demo API key: not shown off a terminal (agentctl keys create makes one)")
    console.file.flush()


async def _verify_artifacts(console: Console, res: Resources, session_id: str) -> int:
    """Every tool result's ref must resolve to an object whose bytes hash to its sha256."""
    _, items = await tasks.read_session(res.sessions, TENANT, session_id)
    checked = 0
    async with agent_state(res.sessions, TENANT) as st:
        for item in items:
            if item.artifact_id is None:
                continue
            row = await st.artifacts.get(item.artifact_id)
            ref = res.store.ref_for(TENANT, row.sha256, row.size_bytes, row.content_type)
            data = await res.store.get(TENANT, ref)  # raises if the sha256 does not match
            console.print(f"  ok  {row.artifact_id}  {len(data):>6} B  {row.content_type}")
            console.print(
                f"      {res.store.uri(ref)}", style="dim", no_wrap=True, overflow="ellipsis"
            )
            checked += 1
    return checked


async def _run_task(
    console: Console,
    client: Client,
    service: TaskService,
    interactive: bool,
    session_id: uuid.UUID,
    gateway: Gateway,
) -> tuple[str, str]:
    caller = Caller.operator(TENANT, "demo-user")
    await service.start(caller, StartRequest(DEMO_TASK, SURVEY_AGENT, session_id=session_id))
    handle = tasks.task_handle(client, str(session_id))
    console.print(f"task: [bold]{DEMO_TASK}[/]\nsession {session_id} · workflow {handle.id}")
    console.print(
        f"watch it from another terminal: {URL_ENV}={gateway.url} {KEY_ENV}=<the demo key> "
        f"agentctl watch {session_id}\n",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    done = asyncio.Event()
    sid = str(session_id)
    watcher = asyncio.create_task(_follow(console, gateway, sid, done))
    decider = asyncio.create_task(_decide_approvals(console, service, sid, interactive, done))
    helpers = [decider]
    try:
        result = await handle.result()
    except BaseException:
        # Stopped (Ctrl-C) or failed: neither helper outlives the gateway they talk to.
        helpers.append(watcher)
        raise
    finally:
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
    await watcher
    return sid, result.status


def _prepare_dirs(session_id: uuid.UUID) -> tuple[Path, Path, Path]:
    """The state dir, the workspace base, and the session's own root seeded with the demo
    files (the cloud worker gives each session {base}/{tenant}/{session})."""
    state = Path(tempfile.mkdtemp(prefix="durable-agents-demo-"))
    state.chmod(0o755)  # as root, PostgreSQL runs as an unprivileged user who must enter it
    base = state / "workspace"
    root = WorkspaceLayout(base).session_root(TENANT, session_id)
    shutil.copytree(DEMO_WORKSPACE, root)
    return state, base, root


async def run_demo(
    console: Console,
    *,
    interactive: bool,
    local_model: str | None = None,
    tool_mode: ToolMode = "auto",
) -> int:
    """`local_model`: a key of workers.stack.local_model.MODELS, else the offline model;
    `tool_mode`: how the local model is offered tools (auto is grammar on llama.cpp)."""
    began = time.monotonic()
    model = model_named(local_model) if local_model else None  # before anything is made
    session_id = uuid.uuid4()  # chosen first, so its workspace can be seeded before it starts
    state, workspace, root = await asyncio.to_thread(_prepare_dirs, session_id)
    seeded = await asyncio.to_thread(workspace_files, root)  # what the report must name
    console.print(Panel.fit("durable-agents demo: a durable agent loop on real services"))
    console.print("starting the embedded stack (Temporal dev server, PostgreSQL, SeaweedFS S3)…")
    stack = DevStack(state / "stack", temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    server = LlamaServer(model, state) if model else None
    local = server.model_settings(tool_mode) if server else None
    provider: ModelProvider = build_provider(local) if local else OfflineProvider()
    kept = True  # unless the demo did its job: a failed or stopped one is kept to look at
    try:
        t0 = time.monotonic()
        if server is not None:
            console.print(f"starting llama-server with {server.model.key} (loading the model)…")
        # Both start at once (loading a model takes a while); both are stopped below.
        started = await asyncio.gather(
            asyncio.to_thread(stack.start),
            asyncio.to_thread(server.start if server else lambda: None),
            return_exceptions=True,
        )
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome
        ep = stack.endpoints
        console.print(
            f"  ready in {time.monotonic() - t0:.1f}s: temporal {ep.temporal_address} · "
            f"postgres {ep.database_url.rsplit('@', 1)[-1]} · s3 {ep.s3_endpoint_url}"
            + (f" · model {server.base_url}" if server else "")
        )
        settings = ep.settings(workspace=workspace, task_queue=DEMO_QUEUE, provider="offline")
        if local is not None:
            settings = settings.model_copy(update={"model": local})
        await migrate(ep.database_migration_url)
        console.print("  AgentState migrations applied")
        async with open_resources(settings.database, settings.s3) as res:
            await res.store.ensure_bucket()
            client = await connect_client(
                ep.temporal_address,
                "default",
                data_converter=data_converter_with_offload(res.store),
            )
            agents = (survey_agent(settings.agent.system_prompt, by_line=local is not None),)
            acts = cloud_activities(settings, res, provider, default_registry(), agents=agents)
            worker = build_cloud_worker(
                client,
                acts,
                task_queue=DEMO_QUEUE,
                # A local Temporal bills no heartbeat: a cancel reaches the model promptly.
                heartbeat_throttle_seconds=DEV_HEARTBEAT_THROTTLE_SECONDS,
                slots=worker_slots(settings.agent),
            )
            async with (
                running(worker),
                serving(create_app(res, client, settings)) as url,
            ):
                what = server.served_name if server else "offline, deterministic"
                console.print(f"  cloud worker running (model: {what})")
                gateway = Gateway(url, await _demo_key(res))
                _announce_gateway(console, gateway)
                console.print()
                service = TaskService(client, res.sessions, res.store, settings)
                sid, status = await _run_task(
                    console, client, service, interactive, session_id, gateway
                )
            row, items = await tasks.read_session(res.sessions, TENANT, sid)
            console.print()
            console.print(timeline_table(row, items))
            console.print("\nartifacts (each re-read from S3 and checked against its sha256):")
            checked = await _verify_artifacts(console, res, sid)
            history = await tasks.task_handle(client, sid).fetch_history()
            size = sum(event.ByteSize() for event in history.events)
            console.print(
                f"\nworkflow history: {len(history.events)} events, {size} bytes of protobuf "
                f"(ids, cursors and refs only); {checked} artifacts verified"
            )
        report = root / REPORT_PATH
        if report.is_file():
            console.print(Panel(escape(report.read_text(errors="replace")), title=REPORT_PATH))
        goal = check_report(status, root, REPORT_PATH, seeded)
        console.print(goal.line(), style="bold green" if goal.done else "bold red")
        console.print(f"task {status} in {time.monotonic() - began:.1f}s; stopping the stack")
        # The demo asked for a report: a task that ended without it did not do its job.
        kept = not goal.done
        return 0 if goal.done else 1
    finally:
        await provider.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)
        await asyncio.to_thread(stack.stop)
        if kept:
            _tell_kept(console, state, session_id, server)
        else:
            shutil.rmtree(state, ignore_errors=True)


def _tell_kept(
    console: Console, state: Path, session_id: uuid.UUID, server: LlamaServer | None
) -> None:
    """A demo that failed or was stopped keeps its state dir, and says how to look at it."""
    stack_dir = state / "stack"
    lines = [
        f"the demo's state is kept in {state}",
        f"  session {session_id} (tenant {TENANT}); its workspace: "
        f"{WorkspaceLayout(state / 'workspace').session_root(TENANT, session_id)}",
        f"  logs: {stack_dir / 'logs'}"
        + (f", the model's: {server.log_path}" if server is not None else ""),
        "  to look at it, start the stack on it (Ctrl-C stops it):",
        f"    agentctl dev up --state-dir {stack_dir} --model-provider offline",
        "  and in another terminal:",
        f"    agentctl show {session_id}",
        f"  remove it when done: rm -rf {state}",
    ]
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    console.file.flush()
