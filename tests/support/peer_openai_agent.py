"""An OpenAI Agents SDK agent on Temporal (`temporalio.openai_agents`), as its users write it:
the tool an activity (`activity_as_tool`); the model comes from the plugin's provider."""

from __future__ import annotations

from datetime import timedelta

from agents import Agent, Runner
from temporalio import activity, workflow
from temporalio.openai_agents import workflow as agents_workflow

from tests.support.peer_workload import INSTRUCTIONS, MODEL, seeded_text


@activity.defn
async def read_result(index: int, size: int) -> str:
    """Read result number `index` (`size` bytes)."""
    return seeded_text(index, size)


@workflow.defn
class OpenAIAgentWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = Agent(
            name="reader",
            instructions=INSTRUCTIONS,
            model=MODEL,
            tools=[
                agents_workflow.activity_as_tool(
                    read_result, start_to_close_timeout=timedelta(seconds=15)
                )
            ],
        )
        result = await Runner.run(agent, prompt, max_turns=10_000)
        return str(result.final_output)
