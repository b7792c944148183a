"""Conversations as the OpenAI Agents SDK's Runner adds them, kept by our AgentStateSession:
what the SDK-session tests share."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from durable_agents import AgentStateSession
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.models import ItemRow
from durable_agents.workers.peers.claim_check import ClaimCheckStore
from durable_agents.workers.resources import Resources

BIG = 200_000


def big_output(seed: str, size: int = BIG) -> str:
    block = hashlib.sha256(seed.encode()).hexdigest()
    return (block * (size // len(block) + 1))[:size]


def conversation(output: str = "sunny") -> list[Any]:
    """Items as the SDK's Runner adds them: input, a call, its output, the answer."""
    return [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "forecast",
            "arguments": '{"place": "Oslo"}',
            "id": "fc_1",
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": output},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
        },
    ]


def session(res: Resources, key: str, tenant: str) -> AgentStateSession:
    return AgentStateSession(key, tenant=tenant, store=ClaimCheckStore(res.store, res.sessions))


async def rows(res: Resources, tenant: str, sid: uuid.UUID) -> list[ItemRow]:
    async with agent_state(res.sessions, tenant) as st:
        return await st.items.page(sid)
