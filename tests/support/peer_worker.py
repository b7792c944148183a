"""A worker process for a peer SDK's agent with our plugin, configured as a user would: the
claim check's store and database from the environment (S3_*, DATABASE_URL), so a test can
SIGKILL it mid-run.

    python -m tests.support.peer_worker openai-agents|pydantic-ai QUEUE TENANT MODEL_URL
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents import ClaimCheckPlugin

MODEL_TIMEOUT = timedelta(seconds=float(os.environ.get("PEER_MODEL_TIMEOUT", "15")))


def sdk_setup(sdk: str, model_url: str) -> tuple[list[Any], type, list[Any]]:
    """(plugins, workflow, activities) of the SDK's own setup, as its users write it."""
    if sdk == "openai-agents":
        from agents.models.openai_provider import OpenAIProvider
        from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin

        from tests.support.peer_openai_agent import OpenAIAgentWorkflow, read_result
        from tests.support.peer_workload import chat_client

        provider = OpenAIProvider(openai_client=chat_client(model_url), use_responses=False)
        params = ModelActivityParameters(start_to_close_timeout=MODEL_TIMEOUT)
        plugin = OpenAIAgentsPlugin(model_params=params, model_provider=provider)
        return [plugin], OpenAIAgentWorkflow, [read_result]
    if sdk == "pydantic-ai":
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

        from tests.support.peer_pydantic_agent import CHAT_CLIENT, PydanticAgentWorkflow

        CHAT_CLIENT.base_url = model_url
        return [PydanticAIPlugin()], PydanticAgentWorkflow, []
    raise SystemExit(f"unknown sdk {sdk!r}: openai-agents or pydantic-ai")


async def main(argv: list[str]) -> int:
    sdk, queue, tenant, model_url = argv
    plugins, workflow, activities = sdk_setup(sdk, model_url)
    if os.environ.get("PEER_CLAIM_CHECK", "1") != "0":  # 0: the SDK alone (the bench's baseline)
        plugins.append(ClaimCheckPlugin(tenant))  # docs/other-sdks.md's one line
    client = await Client.connect(
        os.environ["TEMPORAL_ADDRESS"], namespace="default", plugins=plugins
    )
    async with Worker(client, task_queue=queue, workflows=[workflow], activities=activities):
        print(f"peer worker on {queue}", flush=True)
        await asyncio.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
