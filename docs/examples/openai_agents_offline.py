"""An OpenAI Agents SDK agent on Temporal, with our storage: its tool result goes to S3 and
the workflow history holds references (docs/other-sdks.md).

The model is a stand-in for a real provider: a fake Chat Completions server this script
starts on 127.0.0.1, which asks for the tool once and then answers from what the tool
returned. No network, no key. Run it while `agentctl dev up` runs:

    .venv/bin/python docs/examples/openai_agents_offline.py

For a real provider, drop the fake server and give OpenAIProvider your client (or none: the
SDK's default reads OPENAI_API_KEY). The worker and the starter are one process here; in
production they are two, each connecting with the same plugins.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity, workflow

# The workflow sandbox runs this file again for each workflow run: what it imports comes
# from outside, once.
with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner, set_tracing_disabled
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI
    from temporalio.api.history.v1 import History
    from temporalio.client import Client
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents import workflow as agents_workflow
    from temporalio.worker import Worker

    from durable_agents import ClaimCheckPlugin
    from durable_agents.workers.dev_env import DevEnvError, stack_env
    from durable_agents.workers.peers.claim_check import ENCODING

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

PROMPT = "Did the latest build pass?"
TIMEOUT = timedelta(seconds=30)


@activity.defn
async def read_build_log() -> str:
    """The latest build's log: 401 lines, about 22 KB."""
    lines = [f"build 42 step {i:03d}: compiled module_{i:03d}.py, 0 warnings" for i in range(400)]
    return "\n".join([*lines, "build 42: all 400 steps passed"])


@workflow.defn
class LogReaderWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = Agent(
            name="log_reader",
            instructions="Read the build log, then say whether the build passed.",
            model="fake-model",  # the plugin's model provider serves it
            tools=[
                agents_workflow.activity_as_tool(read_build_log, start_to_close_timeout=TIMEOUT)
            ],
        )
        result = await Runner.run(agent, prompt)
        return str(result.final_output)


def fake_reply(request: dict[str, Any]) -> dict[str, Any]:
    """A stand-in for a real model's Chat Completions reply: the first call asks for
    read_build_log, the next answers from what the tool returned."""
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    message: dict[str, Any]
    if not results:
        call = {"name": "read_build_log", "arguments": "{}"}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
        }
    else:
        lines = str(results[-1]).splitlines()
        verdict = "passed" if lines[-1].endswith("passed") else "did not pass"
        text = f"The log has {len(lines)} lines: the build {verdict}."
        message = {"role": "assistant", "content": text}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": request["model"],
        "choices": [
            {"index": 0, "message": message, "finish_reason": "stop" if results else "tool_calls"}
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def serve_fake_model() -> ThreadingHTTPServer:
    """POST /v1/chat/completions (no streaming) on 127.0.0.1, a free port, in a thread."""
    # Imported here: the workflow sandbox, which runs this file again, refuses http.server.
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(fake_reply(request)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the script prints its own result

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def main() -> int:
    try:
        stack = stack_env()  # the environment's, else `agentctl dev up`'s, from any directory
    except DevEnvError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI's servers
    server = serve_fake_model()
    # Temporal retries the model call: the client makes no retries of its own.
    model_client = AsyncOpenAI(
        base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="fake", max_retries=0
    )
    agents_plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=TIMEOUT),
        model_provider=OpenAIProvider(openai_client=model_client, use_responses=False),
    )
    tenant = os.environ.get("AGENT_TENANT_ID", "acme")
    ours = ClaimCheckPlugin(tenant)  # S3_* and DATABASE_URL from the same place
    address = stack["TEMPORAL_ADDRESS"]
    try:
        client = await Client.connect(
            address,
            namespace=stack.get("TEMPORAL_NAMESPACE", "default"),
            plugins=[agents_plugin, ours],
        )
    except RuntimeError as err:
        server.shutdown()
        print(
            f"error: no Temporal at {address} ({err}): is `agentctl dev up` running?",
            file=sys.stderr,
        )
        return 1
    queue, workflow_id = f"example-{uuid.uuid4().hex[:8]}", f"log-reader-{uuid.uuid4().hex[:8]}"
    try:
        async with Worker(
            client, task_queue=queue, workflows=[LogReaderWorkflow], activities=[read_build_log]
        ):
            answer = await client.execute_workflow(
                LogReaderWorkflow.run, PROMPT, id=workflow_id, task_queue=queue
            )
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        store, _ = await ours.store.open()
    finally:
        await ours.aclose()
        server.shutdown()
    raw = History(events=history.events).SerializeToString()
    text = await read_build_log()
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
