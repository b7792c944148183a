"""A pydantic-ai agent made durable on Temporal, with our storage: its tool result goes to S3
and the workflow history holds references (docs/other-sdks.md).

The model is pydantic-ai's TestModel, a stand-in for a real one: it calls every tool once,
then answers with a fixed text. No network, no key. Run it while `agentctl dev up` runs:

    .venv/bin/python docs/examples/pydantic_ai_offline.py

The worker and the starter are one process here; in production they are two, each
connecting with the same plugins.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from temporalio import workflow

# The workflow sandbox runs this file again for each workflow run: what it imports comes
# from outside, once.
with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, TemporalDurability
    from pydantic_ai.models.test import TestModel
    from temporalio.api.history.v1 import History
    from temporalio.client import Client
    from temporalio.worker import Worker

    from durable_agents import ClaimCheckPlugin
    from durable_agents.workers.dev_env import DevEnvError, stack_env
    from durable_agents.workers.peers.claim_check import ENCODING

PROMPT = "Did the latest build pass?"
ANSWER = "The build log is read: every step passed."

agent = Agent(
    TestModel(custom_output_text=ANSWER),
    name="log_reader",
    instructions="Read the build log, then say whether the build passed.",
    capabilities=[TemporalDurability()],
)


@agent.tool_plain
def read_build_log() -> str:
    """The latest build's log: 401 lines, about 22 KB."""
    lines = [f"build 42 step {i:03d}: compiled module_{i:03d}.py, 0 warnings" for i in range(400)]
    return "\n".join([*lines, "build 42: all 400 steps passed"])


@workflow.defn
class LogReaderWorkflow:
    __pydantic_ai_agents__ = [agent]  # PydanticAIPlugin registers the agent's activities

    @workflow.run
    async def run(self, prompt: str) -> str:
        result = await agent.run(prompt)
        return result.output


async def main() -> int:
    try:
        stack = stack_env()  # the environment's, else `agentctl dev up`'s, from any directory
    except DevEnvError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    tenant = os.environ.get("AGENT_TENANT_ID", "acme")
    ours = ClaimCheckPlugin(tenant)  # S3_* and DATABASE_URL from the same place
    address = stack["TEMPORAL_ADDRESS"]
    try:
        client = await Client.connect(
            address,
            namespace=stack.get("TEMPORAL_NAMESPACE", "default"),
            plugins=[PydanticAIPlugin(), ours],
        )
    except RuntimeError as err:
        print(
            f"error: no Temporal at {address} ({err}): is `agentctl dev up` running?",
            file=sys.stderr,
        )
        return 1
    queue, workflow_id = f"example-{uuid.uuid4().hex[:8]}", f"log-reader-{uuid.uuid4().hex[:8]}"
    try:
        async with Worker(client, task_queue=queue, workflows=[LogReaderWorkflow]):
            answer = await client.execute_workflow(
                LogReaderWorkflow.run, PROMPT, id=workflow_id, task_queue=queue
            )
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        store, _ = await ours.store.open()
    finally:
        await ours.aclose()
    raw = History(events=history.events).SerializeToString()
    text = read_build_log()
    in_history = sum(line.encode() in raw for line in text.splitlines())
    print(f"answer: {answer}")
    where = f"s3://{store.bucket}/{store.prefix}/{tenant}/"
    print(f"tool result: {len(text.encode()):,} bytes, stored in {where}")
    print(f"history: {len(raw):,} bytes, {raw.count(ENCODING)} payloads in it are references")
    print(f"lines of the log in the history: {in_history} of {len(text.splitlines())}")
    print(f"workflow: {workflow_id}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
