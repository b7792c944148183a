"""A real local model through the whole loop: tokens/s, steps, wall time, and our overhead.

Runs tasks on Qwen2.5-Coder (llama.cpp's llama-server, `make local-model` installs both)
with a cloud worker on a throwaway embedded stack. A pass-through proxy in front of the
server (bench/timing_proxy.py; it relays streamed replies as they come) times every model
request and keeps llama.cpp's own `timings`, so each run splits
into time inside the model server and time outside it (Temporal, PostgreSQL, S3, tools,
context assembly): our overhead per step = (task wall - model wall) / steps.

    .venv/bin/python bench/real_model.py [--runs 3] [--model qwen2.5-coder-1.5b]

The survey is the demo's own task, agent and check (`make demo-local`): it completes only
when its report covers every workspace file, and the bench judges the outcome by the same
goal (workers/demo/outcome.py); the answer must hold the fact only the file holds.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script
from timing_proxy import Timed, TimingProxy, serving

from durable_agents.activities.agents import DEFAULT_AGENT
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.providers.offline import REPORT_PATH
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workers.client import tasks
from durable_agents.workers.demo.outcome import check_report, workspace_files
from durable_agents.workers.demo.run import DEMO_TASK
from durable_agents.workers.demo.survey import SURVEY_AGENT, survey_agent
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.stack.llama import LlamaServer
from durable_agents.workers.stack.local_model import DEFAULT_MODEL, model_named
from durable_agents.workers.temporal_client import connect_client

TENANT = "bench"
QUEUE = "bench-real-model"
FACT = "PELICAN-7342"
ANSWER_TASK = "Read the file facts/launch.md and tell me the launch code word it gives."
DEMO_FILES = Path(__file__).resolve().parents[1] / "workers" / "demo" / "workspace"


def seed(root: Path, task: str) -> list[str]:
    """Put the task's files in its workspace; the names the survey must report."""
    if task == "survey":
        shutil.copytree(DEMO_FILES, root, dirs_exist_ok=True)
        return workspace_files(root)
    (root / "facts").mkdir(parents=True, exist_ok=True)
    (root / "facts" / "launch.md").write_text(f"The launch code word is {FACT}.\n")
    return []


def outcome_ok(task: str, status: str, root: Path, answer: str, files: list[str]) -> bool:
    if task == "survey":
        return check_report(status, root, REPORT_PATH, files).done
    return status == "completed" and FACT in answer


async def main(runs: int, model_key: str) -> None:
    async with bench_stack() as (ep, res, state):
        server = LlamaServer(model_named(model_key), state)
        await asyncio.to_thread(server.start)
        proxy = TimingProxy(server.base_url)
        try:
            async with serving(proxy):
                # Grammar, as `auto` picks on llama-server: the proxy relays only chat
                # completions, so `auto` asking the server what it is would pick native.
                grammar = server.model_settings("grammar")
                model = grammar.model_copy(update={"base_url": proxy.url})
                workspace = state / "workspace"
                settings = ep.settings(workspace=workspace, task_queue=QUEUE, provider="offline")
                settings = settings.model_copy(update={"model": model})
                provider = build_provider(model)
                client = await connect_client(ep.temporal_address, "default")
                agents = (survey_agent(settings.agent.system_prompt),)
                acts = cloud_activities(settings, res, provider, default_registry(), agents=agents)
                rows = []
                print(HEADER, flush=True)
                async with running(build_cloud_worker(client, acts, task_queue=QUEUE)):
                    for task in ("survey", "answer"):
                        for n in range(runs):
                            rows.append(await one_run(client, res, proxy, workspace, task))
                            print(fmt(task, n + 1, rows[-1]), flush=True)
                await provider.aclose()
        finally:
            await asyncio.to_thread(server.stop)
    summarize(rows)


async def one_run(
    client: Any, res: Any, proxy: TimingProxy, workspace: Path, task: str
) -> dict[str, Any]:
    sid = uuid.uuid4()
    root = WorkspaceLayout(workspace).session_root(TENANT, sid)
    files = seed(root, task)
    proxy.current = Timed()
    began = time.monotonic()
    handle = await tasks.start_task(
        client,
        res.sessions,
        DEMO_TASK if task == "survey" else ANSWER_TASK,
        # The bench measures the loop, not a person deciding: writes need no approval.
        tasks.TaskOptions(
            tenant_id=TENANT,
            task_queue=QUEUE,
            max_steps=20,
            agent=SURVEY_AGENT if task == "survey" else DEFAULT_AGENT,
            loosened_approvals=dict.fromkeys(("write_file", "edit_file", "append_file"), "never"),
            loosened_by="bench",
        ),
        session_id=sid,
    )
    result = await handle.result()
    wall = time.monotonic() - began
    _, items = await tasks.read_session(res.sessions, TENANT, str(sid))
    answers = [i for i in items if i.kind == "assistant_message"]
    t = proxy.current
    model_wall = sum(t.wall)
    steps = max(1, len(t.wall))
    return {
        "status": result.status,
        "ok": outcome_ok(task, result.status, root, answers[-1].text if answers else "", files),
        "steps": len(t.wall),
        "wall": wall,
        "model_wall": model_wall,
        "overhead_per_step": (wall - model_wall) / steps,
        "model_per_step": model_wall / steps,
        "prompt_tps": t.prompt_tokens / (t.prompt_ms / 1000) if t.prompt_ms else 0.0,
        "gen_tps": t.predicted_tokens / (t.predicted_ms / 1000) if t.predicted_ms else 0.0,
        "prompt_tokens": t.prompt_tokens,
        "generated_tokens": t.predicted_tokens,
        "timings_unread": t.unread,
    }


def fmt(task: str, n: int, r: dict[str, Any]) -> str:
    share = 100 * r["overhead_per_step"] / r["model_per_step"] if r["model_per_step"] else 0.0
    return (
        f"| {task} #{n} | {r['status']}{'' if r['ok'] else ' (wrong outcome)'} | {r['steps']} "
        f"| {r['wall']:.1f} | {r['model_per_step']:.2f} | {r['overhead_per_step'] * 1000:.0f} "
        f"| {share:.1f}% | {r['prompt_tps']:.0f} | {r['gen_tps']:.1f} "
        f"| {r['prompt_tokens']} / {r['generated_tokens']} |"
    )


HEADER = (
    "| run | outcome | steps | wall s | model s/step | ours ms/step | ours/model "
    "| prompt tok/s | gen tok/s | tokens in/out |\n|---|---|---|---|---|---|---|---|---|---|"
)


def summarize(rows: list[dict[str, Any]]) -> None:
    unread = sum(r["timings_unread"] for r in rows)
    if unread:
        print(f"\nnote: {unread} replies carried no llama.cpp timings (tokens/s undercounted)")
    ok = sum(r["ok"] for r in rows)
    overhead = [r["overhead_per_step"] for r in rows]
    model = [r["model_per_step"] for r in rows]
    print(
        f"\ncorrect outcomes: {ok}/{len(rows)}; ours per step: median "
        f"{statistics.median(overhead) * 1000:.0f} ms vs the model's "
        f"{statistics.median(model):.2f} s "
        f"({100 * statistics.median(overhead) / statistics.median(model):.1f}%)"
    )


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each task")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.model))
