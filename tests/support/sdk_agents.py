"""The `agent` docs/other-sdks.md's AgentState blocks run with, as Python to put before a
block: an agent of each SDK with one tool (the build log of docs/examples/), on the examples'
stand-in models, so no key and no network. The block's own text follows unchanged."""

from __future__ import annotations

from tests.support.doc_blocks import DOCS

EXAMPLES = DOCS / "examples"
OPENAI_ANSWER = "The log has 401 lines: the build passed."  # the fake server's, after the tool
PYDANTIC_ANSWER = "The build log is read: every step passed."

# The OpenAI Agents SDK: the fake Chat Completions server docs/examples/ starts, which asks
# for read_build_log once and then answers from its result.
OPENAI_AGENT = f"""
import sys
sys.path.insert(0, {str(EXAMPLES)!r})
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI
from openai_agents_offline import read_build_log, serve_fake_model

set_tracing_disabled(True)
fake_model = serve_fake_model()
agent = Agent(
    name="log_reader",
    instructions="Read the build log, then say whether the build passed.",
    model=OpenAIChatCompletionsModel(
        "fake-model",
        AsyncOpenAI(
            base_url=f"http://127.0.0.1:{{fake_model.server_port}}/v1",
            api_key="fake",
            max_retries=0,
        ),
    ),
    tools=[function_tool(read_build_log)],
)
"""

# pydantic-ai: its TestModel, which calls each tool once and then answers.
PYDANTIC_AGENT = f"""
import sys
sys.path.insert(0, {str(EXAMPLES)!r})
import pydantic_ai
from pydantic_ai.models.test import TestModel
from openai_agents_offline import read_build_log

agent = pydantic_ai.Agent(
    TestModel(custom_output_text={PYDANTIC_ANSWER!r}),
    instructions="Read the build log, then say whether the build passed.",
)
agent.tool_plain(read_build_log)
"""
