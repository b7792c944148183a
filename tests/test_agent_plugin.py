"""Every worker of ours is built with the one plugin (workers/process/plugin.py): the cloud
worker gets the cloud's workflows, its activities, FailureWords first among its interceptors
and the sandbox asked for; no module under workers/ assembles a Worker by hand."""

from __future__ import annotations

import ast
import uuid

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agents.activities.failure_words import FailureWords
from durable_agents.workers.process.cloud import build_cloud_worker
from durable_agents.workers.process.plugin import CLOUD_WORKFLOWS, AgentPlugin
from tests.support.imports import modules


def test_no_worker_of_ours_is_assembled_by_hand() -> None:
    by_hand = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Worker"):
                continue
            keywords = {k.arg for k in node.keywords}
            if keywords & {"workflows", "activities", "interceptors", "workflow_runner"}:
                by_hand.append(f"{name}:{node.lineno}")
    assert by_hand == []


async def test_the_cloud_worker_runs_with_the_plugin(client: Client) -> None:
    queue = f"plugin-{uuid.uuid4().hex[:8]}"
    worker = build_cloud_worker(client, [], task_queue=queue, sandbox="strict")
    config = worker.config(active_config=True)
    assert set(config.get("workflows", [])) == set(CLOUD_WORKFLOWS)
    interceptors = list(config.get("interceptors", []))
    assert interceptors and isinstance(interceptors[0], FailureWords)
    assert isinstance(config.get("workflow_runner"), SandboxedWorkflowRunner)
    unsandboxed = build_cloud_worker(client, [], task_queue=f"{queue}-off")
    assert isinstance(
        unsandboxed.config(active_config=True).get("workflow_runner"), UnsandboxedWorkflowRunner
    )


def test_a_tools_only_worker_serves_no_workflow() -> None:
    plugin = AgentPlugin([], workflows=())
    assert plugin.workflows == [] and plugin.workflow_runner is None
    assert isinstance(next(iter(plugin.interceptors or [])), FailureWords)
