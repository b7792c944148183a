"""What the peer agents' workflow modules import (tests/support/peer_openai_agent.py,
tests/support/peer_pydantic_agent.py): the workload's names, its seeded tool results and
the model's client, and nothing of the fake model's server (tests/support/peer_agents.py).

A workflow sandbox re-imports a workflow module and what it imports in every run, and a
worker with max_cached_workflows=0 starts a run at every workflow task: importing the
server's aiohttp there was half the CPU of tests/test_peer_plugins.py."""

from __future__ import annotations

import base64
import hashlib

from openai import AsyncOpenAI

MODEL = "gpt-fake"
INSTRUCTIONS = "Read every result the tool gives, then answer."


def seeded_text(index: int, size: int) -> str:
    """`size` bytes of ASCII, distinct per index (bench/naive_temporal.py's seeded_text)."""
    raw = base64.b64encode(hashlib.shake_256(f"bench:{index}".encode()).digest(size)).decode()
    lines = [raw[i : i + 76] for i in range(0, len(raw), 76)]
    return "\n".join(lines)[:size]


def chat_client(url: str) -> AsyncOpenAI:
    # Temporal owns retries (the integrations' own advice): the provider SDK makes none.
    return AsyncOpenAI(base_url=url, api_key="fake", max_retries=0)
