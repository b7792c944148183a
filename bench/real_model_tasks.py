"""Small file tasks on a real local model, each checked, per model and tool mode.

Runs the tasks of bench/real_model_task_set.py (read then write, edit a file, search then
answer, a multi-file summary, a refusal, a write that needs approval, the demo's survey) on
Qwen2.5-Coder (llama.cpp's llama-server; `make local-model` installs both models) with a
cloud worker on a throwaway embedded stack, in each tool mode (native: the request's `tools`;
grammar: tools in the prompt, the reply held to one call or an answer). Every call that asks
for approval is approved. A pass-through proxy (bench/timing_proxy.py) keeps each request and
the reply as the server sent it.

    .venv/bin/python bench/real_model_tasks.py [--runs 1] [--models qwen2.5-coder-1.5b,...]
        [--modes grammar,native] [--tasks read_write,edit,...] [--trace DIR]

Each task runs as an agent whose check is the task's goal, so the loop accepts an answer only
when the goal holds; the bench judges the run by the same goal on what it left, and by what
the task's check cannot see (an approval asked for, nothing written).

Per run: the verdict; a false completion (completed, goal not met); steps (model
requests); tool results that were errors (unknown tool, invalid arguments, refused path);
tokens in/out as the server reported them; wall seconds. --trace writes each run's requests
and replies (what the model wrote, before any reading of ours) to DIR.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from real_model_task_set import TASK_NAMES, TASKS, Outcome, Task
from temporalio.client import WorkflowFailureError
from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script
from timing_proxy import Timed, TimingProxy, serving

from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.providers.tool_grammar import ToolMode
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.stack.llama import LlamaServer
from durable_agents.workers.stack.local_model import MODELS, model_named
from durable_agents.workers.temporal_client import connect_client

TENANT = "bench"
TASK_SECONDS = 900


async def main(
    runs: int,
    models: list[str],
    modes: list[ToolMode],
    chosen: list[Task],
    trace: Path | None,
    temperature: float | None,
) -> None:
    rows: list[dict[str, Any]] = []
    async with bench_stack() as (ep, res, state):
        client = await connect_client(ep.temporal_address, "default")
        for key in models:
            server = LlamaServer(model_named(key), state)
            await asyncio.to_thread(server.start)
            proxy = TimingProxy(server.base_url)
            try:
                async with serving(proxy):
                    for mode in modes:
                        rows += await _model_runs(
                            client,
                            ep,
                            res,
                            state,
                            server,
                            proxy,
                            mode,
                            chosen,
                            runs,
                            trace,
                            temperature,
                        )
            finally:
                await asyncio.to_thread(server.stop)
    summarize(rows)


async def _model_runs(
    client: Any,
    ep: Any,
    res: Any,
    state: Path,
    server: LlamaServer,
    proxy: TimingProxy,
    mode: ToolMode,
    chosen: list[Task],
    runs: int,
    trace: Path | None,
    temperature: float | None,
) -> list[dict[str, Any]]:
    queue = f"bench-tasks-{uuid.uuid4().hex[:8]}"
    model = server.model_settings(mode).model_copy(update={"base_url": proxy.url})
    if temperature is not None:
        model = model.model_copy(update={"temperature": temperature})
    workspace = state / "workspace"
    settings = ep.settings(workspace=workspace, task_queue=queue, provider="offline")
    settings = settings.model_copy(update={"model": model})
    provider = build_provider(model)
    service = TaskService(client, res.sessions, res.store, settings)
    agents = [task.agent(settings.agent.system_prompt) for task in chosen]
    acts = cloud_activities(settings, res, provider, default_registry(), agents=agents)
    rows = []
    print(f"\n{server.model.key}, tool mode {mode}\n\n{HEADER}", flush=True)
    try:
        async with running(build_cloud_worker(client, acts, task_queue=queue)):
            for n in range(runs):
                for task in chosen:
                    row = await one_run(client, res, service, proxy, workspace, queue, task)
                    row |= {"model": server.model.key, "mode": mode, "task": task.name, "n": n}
                    rows.append(row)
                    print(fmt(row), flush=True)
                    if trace is not None:
                        _write_trace(trace, row, proxy.current)
    finally:
        await provider.aclose()
    return rows


async def one_run(
    client: Any,
    res: Any,
    service: TaskService,
    proxy: TimingProxy,
    workspace: Path,
    queue: str,
    task: Task,
) -> dict[str, Any]:
    sid = uuid.uuid4()
    root = WorkspaceLayout(workspace).session_root(TENANT, sid)
    root.mkdir(parents=True, exist_ok=True)
    seeded = task.seed(root)
    proxy.current = Timed()
    loosened = {} if task.write_approval else {"write_file": "never"}
    began = time.monotonic()
    handle = await tasks.start_task(
        client,
        res.sessions,
        task.text,
        tasks.TaskOptions(
            tenant_id=TENANT,
            task_queue=queue,
            max_steps=task.max_steps,
            agent=task.agent_name,
            loosened_approvals=loosened,
            loosened_by="bench" if loosened else None,
        ),
        session_id=sid,
    )
    done = asyncio.Event()
    approver = asyncio.create_task(_approve_all(service, str(sid), done))
    timed_out = False
    try:
        await asyncio.wait_for(handle.result(), TASK_SECONDS)
    except TimeoutError:
        await handle.cancel()
        timed_out = True
    except WorkflowFailureError:
        pass  # e.g. the step limit: the session's status says which
    finally:
        done.set()
        await approver
    wall = time.monotonic() - began
    session, items = await tasks.read_session(res.sessions, TENANT, str(sid))
    status = "timed out" if timed_out else str(session.status)
    if status == "failed":
        errors = [i.text or "" for i in items if i.kind == "error"]
        status = f"failed ({errors[-1].split(':')[0][:40]})" if errors else status
    answers = [i for i in items if i.kind == "assistant_message" and i.text]
    outcome = Outcome(root, status, answers[-1].text or "" if answers else "", items, seeded)
    ok = await task.judge(outcome)
    tokens_in, tokens_out = _usage(proxy.current)
    return {
        "status": status,
        "ok": ok,
        "false_completion": status == "completed" and not ok,
        "steps": len(proxy.current.wall),
        "tool_calls": sum(1 for i in items if i.kind == "tool_call"),
        "tool_errors": sum(
            1 for i in items if i.kind == "tool_result" and (i.data or {}).get("error_type")
        ),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "wall": wall,
    }


async def _approve_all(service: TaskService, session_id: str, done: asyncio.Event) -> None:
    caller = Caller.operator(TENANT, "bench")
    decided: set[str] = set()
    while not done.is_set():
        live = await service.live_status(caller, session_id)
        for pending in live.pending_approvals:
            if pending.tool_call_id not in decided:
                decided.add(pending.tool_call_id)
                await service.approve(caller, session_id, pending.tool_call_id)
        await asyncio.sleep(0.3)


def _events(raw: bytes) -> list[dict[str, Any]]:
    """A reply's JSON objects: the whole body, or each event of a stream."""
    try:
        whole = json.loads(raw)
        return [whole] if isinstance(whole, dict) else []
    except ValueError:
        pass
    out = []
    for line in raw.splitlines():
        line = line.strip()
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
            try:
                event = json.loads(line[5:])
            except ValueError:
                continue
            if isinstance(event, dict):
                out.append(event)
    return out


def _usage(timed: Timed) -> tuple[int, int]:
    """Prompt and completion tokens as the server reported them (prompt tokens counted
    whole, cached ones too)."""
    tokens_in = tokens_out = 0
    for _, raw in timed.exchanges:
        usage = next((e["usage"] for e in reversed(_events(raw)) if e.get("usage")), None)
        if isinstance(usage, dict):
            tokens_in += int(usage.get("prompt_tokens") or 0)
            tokens_out += int(usage.get("completion_tokens") or 0)
    return tokens_in, tokens_out


def _written(raw: bytes) -> dict[str, Any]:
    """What the model wrote in one reply: its text and its native tool calls."""
    text: list[str] = []
    calls: list[Any] = []
    for event in _events(raw):
        for choice in event.get("choices") or ():
            part = choice.get("delta") or choice.get("message") or {}
            text.append(part.get("content") or "")
            calls += part.get("tool_calls") or []
    return {"text": "".join(text), "tool_calls": calls}


def _write_trace(trace: Path, row: dict[str, Any], timed: Timed) -> None:
    trace.mkdir(parents=True, exist_ok=True)
    name = f"{row['model']}-{row['mode']}-{row['task']}-{row['n']}.json"
    exchanges = [
        {"request": json.loads(body), "reply": _written(raw)} for body, raw in timed.exchanges
    ]
    (trace / name).write_text(json.dumps({"run": row, "exchanges": exchanges}, indent=1))


HEADER = (
    "| task | run | status | check | steps | tool calls (errors) | tokens in/out | s |\n"
    "|---|---|---|---|---|---|---|---|"
)


def fmt(r: dict[str, Any]) -> str:
    verdict = "ok" if r["ok"] else ("FALSE COMPLETION" if r["false_completion"] else "failed")
    return (
        f"| {r['task']} | {r['n'] + 1} | {r['status']} | {verdict} | {r['steps']} "
        f"| {r['tool_calls']} ({r['tool_errors']}) | {r['tokens_in']} / {r['tokens_out']} "
        f"| {r['wall']:.0f} |"
    )


def per_run(group: Sequence[dict[str, Any]]) -> str:
    """The issue's reading of a model and mode: the survey's successes, and per run how many
    of the other tasks it did ("5, 5, 4" over three runs)."""
    runs = sorted({r["n"] for r in group})
    survey = [r["ok"] for r in group if r["task"] == "survey"]
    others = [sum(r["ok"] for r in group if r["n"] == n and r["task"] != "survey") for n in runs]
    of = len({r["task"] for r in group if r["task"] != "survey"})
    said = f"other tasks done per run (of {of}): {', '.join(map(str, others))}"
    return f"{said}; survey {sum(survey)} of {len(survey)}" if survey else said


def summarize(rows: Sequence[dict[str, Any]]) -> None:
    print(
        "\n| model | mode | checked success | false completions | steps (mean) "
        "| tool errors | tokens in/out (mean) | s (median) |\n|---|---|---|---|---|---|---|---|"
    )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["mode"]), []).append(r)
    for (model, mode), group in groups.items():
        n = len(group)
        print(
            f"| {model} | {mode} | {sum(r['ok'] for r in group)}/{n} "
            f"| {sum(r['false_completion'] for r in group)} "
            f"| {statistics.mean(r['steps'] for r in group):.1f} "
            f"| {sum(r['tool_errors'] for r in group)} "
            f"| {statistics.mean(r['tokens_in'] for r in group):.0f} / "
            f"{statistics.mean(r['tokens_out'] for r in group):.0f} "
            f"| {statistics.median(r['wall'] for r in group):.0f} |"
        )
    for (model, mode), group in groups.items():
        print(f"{model}, {mode}: {per_run(group)}")


def _names(value: str, known: Sequence[str], what: str) -> list[str]:
    names = [v for v in value.split(",") if v]
    unknown = [v for v in names if v not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; known: {', '.join(known)}")
    return names


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="runs of each task")
    parser.add_argument("--models", default="qwen2.5-coder-1.5b,qwen2.5-coder-0.5b")
    parser.add_argument("--modes", default="grammar,native")
    parser.add_argument("--tasks", default=",".join(TASK_NAMES))
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument(
        "--temperature", type=float, default=None, help="instead of the server's --temp 0.2"
    )
    args = parser.parse_args()
    models = _names(args.models, sorted(MODELS), "model")
    modes = [cast(ToolMode, m) for m in _names(args.modes, ["grammar", "native"], "mode")]
    picked = set(_names(args.tasks, TASK_NAMES, "task"))
    chosen = [t for t in TASKS if t.name in picked]
    asyncio.run(main(args.runs, models, modes, chosen, args.trace, args.temperature))
