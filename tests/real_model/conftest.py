"""The real-model tier: llama.cpp's llama-server with Qwen2.5-Coder 1.5B on loopback.

Run with `make test-real-model` (which installs both first); `make test` deselects it. A
missing llama-server or model fails these tests with the command to run, never skips them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.providers.factory import build_provider
from durable_agents.workers.stack.llama import LlamaServer
from durable_agents.workers.stack.local_model import DEFAULT_MODEL, model_named

# Small enough for a 1.5B model on two cores to answer in tens of seconds a step.
CONTEXT = 8192


@pytest.fixture(scope="session")
def llama() -> Iterator[LlamaServer]:
    state = Path(tempfile.mkdtemp(prefix="durable-agents-llama-"))
    server = LlamaServer(model_named(DEFAULT_MODEL), state, context=CONTEXT)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
async def local_provider(llama: LlamaServer) -> AsyncIterator[ModelProvider]:
    provider = build_provider(llama.model_settings())
    yield provider
    await provider.aclose()
