"""What a replay's activities serve from the session it replays (storage/replays.py).

call_model: the recorded reply at the same step is the cassette. When this step's request
has the fingerprint the recorded reply committed (providers/request_fingerprint.py), the
reply is served from the record (no provider call, no tokens spent) with the record's call
ids, so the next request matches too; otherwise the live provider answers and the reply
says which part of the request differed (model, system prompt, tools or messages).

run_tool: a call of a tool run live (`live_tools`) runs as in any session. Any other call
is served the recorded session's result of the same step, tool and arguments, by
reference; with no such result it is refused, nothing run: a replay never acts unless told
to. Such calls wait for no approval, and a delegation or a device's tool among them is
served or refused here like the rest.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from durable_agents.activities.context.call_ids import provider_id_of
from durable_agents.activities.context.model_context import ConfigCache
from durable_agents.activities.providers.base import ModelReply, ProviderCall, Usage
from durable_agents.activities.providers.request_fingerprint import REQUEST_KEY
from durable_agents.activities.tools.builtin import WORKFLOW_TOOLS
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.models import ItemRow
from durable_agents.storage.replays import (
    LIVE,
    MISS_KEY,
    RECORDED,
    REFUSED,
    SERVED_KEY,
    RecordedReply,
    ReplayMark,
    commit_replayed_result,
    recorded_reply,
    recorded_result,
)
from durable_agents.storage.tool_results import ToolResult, commit_tool_result
from durable_agents.workflows.contracts import ToolCallRef

NOT_RECORDED = "NotRecorded"


@dataclass
class Cassette:
    """The recorded reply of one step (None: the record has no such step) and the config
    its turn ran with."""

    recorded: RecordedReply | None
    recorded_config: uuid.UUID | None
    played: bool = False

    def play(self, fingerprint: str) -> ModelReply | None:
        """The recorded reply, when `fingerprint` is that of the request it answered."""
        if self.recorded is None:
            return None
        reply = self.recorded.reply
        if reply.data.get(REQUEST_KEY) != fingerprint:
            return None
        self.played = True
        return ModelReply(
            text=reply.text,
            tool_calls=[
                ProviderCall(
                    id=provider_id_of(c.tool_call_id or "", c.data) or "",
                    name=c.tool_name or "",
                    arguments=dict(c.data.get("arguments", {})),
                )
                for c in self.recorded.calls
            ],
            finish_reason=str(reply.data.get("finish_reason", "stop")),
            usage=Usage(),  # nothing was asked of the provider
            model=str(reply.data.get("model", "")),
        )

    async def marks(
        self, st: AgentState, config_id: uuid.UUID | None, configs: ConfigCache
    ) -> dict[str, Any]:
        """What the reply's item records of how it was served."""
        if self.played:
            return {SERVED_KEY: RECORDED}
        return {SERVED_KEY: LIVE, MISS_KEY: await self._miss(st, config_id, configs)}

    async def _miss(self, st: AgentState, config_id: uuid.UUID | None, configs: ConfigCache) -> str:
        """Which part of the request differed from the record's: named from the two turns'
        recorded configs, which hold the model, system prompt and tools (the same config
        for both: the messages)."""
        if self.recorded is None:
            return "no recorded step"
        if REQUEST_KEY not in self.recorded.reply.data:
            return "no recorded request"
        theirs = self.recorded_config
        if theirs is None or config_id is None:
            return "request"
        if theirs == config_id:
            return "messages"
        ours = await configs.load(st.configs, st.tenant_id, config_id)
        recorded = await configs.load(st.configs, st.tenant_id, theirs)
        if ours.model != recorded.model:
            return "model"
        if ours.system_prompt != recorded.system_prompt:
            return "system prompt"
        if ours.tool_schemas != recorded.tool_schemas:
            return "tools"
        return "messages"


async def cassette_for(st: AgentState, mark: ReplayMark, step: int) -> Cassette:
    """The cassette of a replay's step: the recorded session's reply at the same step."""
    recorded = await recorded_reply(st, mark.of, step)
    config = None
    if recorded is not None and recorded.reply.turn_id is not None:
        turn = await st.turns.get(recorded.reply.turn_id)
        config = turn.context_config_id if turn is not None else None
    return Cassette(recorded, config)


def replayed_refs(refs: list[ToolCallRef], mark: ReplayMark) -> list[ToolCallRef]:
    """The refs of a replay's reply: a call not run live asks nobody and runs through
    run_tool on the cloud queue, which serves or refuses it (a delegation and a device's
    tool too: their names stay in AgentState, as an unknown tool's do)."""
    served = []
    for ref in refs:
        if ref.name in mark.live_tools:
            served.append(ref)
            continue
        name = "" if ref.name in WORKFLOW_TOOLS else ref.name
        served.append(replace(ref, name=name, needs_approval=False, on_device=False))
    return served


def replayed_by(mark: ReplayMark | None, name: str, known: bool) -> ReplayMark | None:
    """The replay mark when run_tool serves this call from the record (or refuses it)
    rather than run it; None: it runs. A call of a tool the session's agent does not have
    fails as it would in any session."""
    if mark is None or not known or name in mark.live_tools:
        return None
    return mark


async def serve_result(
    st: AgentState,
    mark: ReplayMark,
    *,
    session_id: uuid.UUID,
    tool_call_id: str,
    name: str,
    arguments: dict[str, Any],
    step: int,
    idempotency_key: str,
) -> ItemRow:
    """Commit the call's result from the record, or its refusal: nothing is run."""
    recorded = await recorded_result(st, mark.of, step, tool_call_id, name, arguments)
    if recorded is not None:
        return await commit_replayed_result(
            st,
            recorded,
            session_id=session_id,
            tool_call_id=tool_call_id,
            tool_name=name,
            step=step,
            idempotency_key=idempotency_key,
        )
    words = (
        f"not run: this task replays session {mark.of}, whose record has no result of "
        f"{name} with these arguments at step {step}, and {name} is not run live in it "
        f"(a replay with --live {name} runs it)"
    )
    result = ToolResult(
        session_id=session_id,
        tool_call_id=tool_call_id,
        tool_name=name,
        step=step,
        idempotency_key=idempotency_key,
        error_type=NOT_RECORDED,
        error=words,
        extra={SERVED_KEY: REFUSED},
    )
    return await commit_tool_result(st.db, st.tenant_id, result)
