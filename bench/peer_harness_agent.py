"""The bench's agent on temporal-agent-harness 0.8, as its README and its pydantic-ai example
write one: an `@agent.defn` session workflow whose `ask` handler runs a pydantic-ai
`TemporalAgent` (the upstream durability, unmodified) with the harness's streaming handler, and
the tool a durable `@agent.activity_tool_defn` adapted with `build_harness_toolset`, so the
harness owns its approval and tool events. The workload is tests/support/peer_agents.py's.

Its plugins as the harness's README sets them: the SDK's first (`PydanticAIPlugin` on the
client, `AgentPlugin(agent)` on the worker), `AgentHarnessPlugin(tools=...)` last (its Pydantic
converter and large-payload offload: payloads of 1.5 MB or more go to its local-file driver,
here one directory per run so the bench can count what it stores).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.workflow import ActivityConfig

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalAgent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits
    from temporal_agent_harness.ai_sdks.pydantic_ai_harness import (
        HarnessDeps,
        build_harness_toolset,
        harness_event_stream_handler,
    )
    from temporal_agent_harness.harness import agent
    from temporal_agent_harness.harness.agent_protocol import (
        AgentConfig,
        TextMessage,
        TextReply,
        ToolApprovalPolicy,
    )
    from temporal_agent_harness.harness.agent_workflow import AgentWorkflowRunner
    from temporal_agent_harness.plugin import AgentHarnessPlugin
    from temporal_agent_harness.utils.large_payload import local_payload_storage

    from tests.support.peer_workload import INSTRUCTIONS, MODEL, chat_client, seeded_text

WORKFLOW = "HarnessReader"
# The worker points it at the bench's model before it starts (AsyncOpenAI's base_url is settable).
CHAT_CLIENT = chat_client("http://127.0.0.1:9/v1")


@agent.activity_tool_defn(
    activity_config=ActivityConfig(start_to_close_timeout=timedelta(seconds=60)),
)
async def read_result(index: int, size: int) -> str:
    """Read result number `index` (`size` bytes)."""
    return seeded_text(index, size)


TOOLS = [read_result]
_TOOLSET, _TOOL_CONFIG = build_harness_toolset(TOOLS, id="reader-tools")

READER = TemporalAgent(
    Agent(
        OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=CHAT_CLIENT)),
        instructions=INSTRUCTIONS,
        deps_type=HarnessDeps,
        toolsets=[_TOOLSET],
    ),
    name="harness-reader",
    event_stream_handler=harness_event_stream_handler,
    tool_activity_config=_TOOL_CONFIG,
    activity_config=ActivityConfig(start_to_close_timeout=timedelta(seconds=120)),
)


@agent.defn(name=WORKFLOW)
class HarnessReaderWorkflow:
    """A session that reads every result the model asks for."""

    @agent.init
    def __init__(self, config: AgentConfig) -> None:
        self._runner = AgentWorkflowRunner(
            config,
            stream=WorkflowStream(),
            approval_policy_default=ToolApprovalPolicy.dangerously_skip_all(),
        )
        self._history: list[ModelMessage] = []

    @agent.accepts
    async def ask(self, message: TextMessage) -> TextReply:
        """Ask the reader."""
        result = await READER.run(
            message.text,
            deps=HarnessDeps(runner=self._runner),
            message_history=self._history,
            # pydantic-ai stops a run at 50 requests by default; the workload makes more.
            usage_limits=UsageLimits(request_limit=None),
        )
        self._history = result.all_messages()
        return TextReply(text=str(result.output))


def client_plugins(offload_dir: Path) -> list[Any]:
    """The plugins every client and worker of the deployment carries, in the README's order."""
    storage = local_payload_storage(base_dir=offload_dir)
    return [PydanticAIPlugin(), AgentHarnessPlugin(tools=TOOLS, large_payload_offload=storage)]


def worker_plugins() -> list[Any]:
    return [AgentPlugin(READER)]
