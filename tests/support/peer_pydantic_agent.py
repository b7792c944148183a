"""A pydantic-ai agent with its Temporal durability (`pydantic_ai.durable_exec.temporal`), as
its users write it: the TemporalDurability capability, the workflow listing the agent in
`__pydantic_ai_agents__` (PydanticAIPlugin registers its activities on the worker)."""

from __future__ import annotations

from datetime import timedelta

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits
from temporalio import workflow
from temporalio.workflow import ActivityConfig

from tests.support.peer_workload import INSTRUCTIONS, MODEL, chat_client, seeded_text

# The model's client lives in the worker's process (activities run there); tests point it
# at their server before the worker starts (AsyncOpenAI's base_url is settable).
CHAT_CLIENT = chat_client("http://127.0.0.1:9/v1")

reader = Agent(
    OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=CHAT_CLIENT)),
    name="reader",
    instructions=INSTRUCTIONS,
    # A call cut short by a lost worker is retried after this (the SIGKILL test waits it out).
    capabilities=[
        TemporalDurability(
            activity_config=ActivityConfig(start_to_close_timeout=timedelta(seconds=15))
        )
    ],
)


@reader.tool_plain(name="read_result")
async def read_result(index: int, size: int) -> str:
    """Read result number `index` (`size` bytes)."""
    return seeded_text(index, size)


@workflow.defn
class PydanticAgentWorkflow:
    __pydantic_ai_agents__ = [reader]

    @workflow.run
    async def run(self, prompt: str) -> str:
        # pydantic-ai stops a run at 50 requests by default; the workload makes more.
        result = await reader.run(prompt, usage_limits=UsageLimits(request_limit=None))
        return str(result.output)
