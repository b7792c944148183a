"""What a model reply commits, in the reply's transaction: the assistant item, one tool_call
item per call it asked for, and for each call past the per-reply cap a result saying it was
not run (a reply may ask for any number of calls; the loop runs the first `max_calls`). A
reply that called no tool and is no answer says so in its item's data (NON_ANSWER_KEY): it
keeps what the model wrote, for a person to read, but the loop does not end the task on it."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio import activity

from durable_agents.activities.context.call_ids import (
    PROVIDER_ID_KEY,
    our_call_id,
    provider_id_to_keep,
)
from durable_agents.activities.context.model_context import budget_of, tools_of
from durable_agents.activities.context_windows import Fitted
from durable_agents.activities.policies.text_limits import bounded_arguments
from durable_agents.activities.providers.errors import cut_marked
from durable_agents.activities.providers.non_answers import non_answer_of
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.context_configs import ContextConfig
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.storage.tool_results import ToolResult, commit_tool_result
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.non_answers import LOOKS_LIKE_KEY, NON_ANSWER_KEY
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workflows.contracts import ModelCallInput
from durable_agents.workflows.policies import step_key

CALL_LIMIT_ERROR = "ToolCallLimit"
# In the reply item's data when the reply asked for more calls than run: how many run.
CALLS_RUN_KEY = "calls_run"


def calls_run(reply: ItemRow) -> list[dict[str, Any]]:
    """The calls of a committed reply that the loop runs (the first ones, up to the cap it
    was committed under)."""
    calls: list[dict[str, Any]] = reply.data.get("tool_calls", [])
    limit = reply.data.get(CALLS_RUN_KEY)
    return calls if limit is None else calls[:limit]


class ReplyItems:
    def __init__(
        self,
        inp: ModelCallInput,
        session_id: uuid.UUID,
        config: ContextConfig,
        *,
        max_argument_bytes: int,
        max_calls: int,
    ) -> None:
        self._inp = inp
        self._session_id = session_id
        self._config = config
        self._max_argument_bytes = max_argument_bytes
        self._max_calls = max_calls

    async def commit(
        self,
        st: AgentState,
        fitted: Fitted,
        context: dict[str, Any],
        request: dict[str, Any] | None = None,
    ) -> tuple[ItemRow, dict[str, ItemRow]]:
        """The assistant item and the tool_call items of the calls that run, by call id.
        `context`: what the reply's context was made of; `request`: what the item's data
        says of the request the reply answers (its fingerprint; in a replay, how the reply
        was served)."""
        inp, reply = self._inp, fitted.reply
        encoding = budget_of(self._config).encoding
        # Our ids, never the model's: its ids may repeat or be empty (see call_ids).
        calls = [(our_call_id(inp.step, i), c) for i, c in enumerate(reply.tool_calls)]
        # Oversized arguments are not stored (nor re-sent to the model every step): a marker
        # stands in, and running the call reports the error to the model.
        arguments = {
            cid: bounded_arguments(
                cut_marked(c.arguments, reply.finish_reason), self._max_argument_bytes
            )
            for cid, c in calls
        }
        data: dict[str, Any] = {
            "step": inp.step,
            "tool_calls": [{"id": cid, "name": c.name} for cid, c in calls],
            "finish_reason": reply.finish_reason,
            "model": reply.model or self._config.model,
            # Provider, agent and context config are the turn's (turns.context_config_id):
            # not repeated on every reply.
            "usage": {
                "input_tokens": reply.usage.input_tokens,
                "output_tokens": reply.usage.output_tokens,
                **({"cached_tokens": n} if (n := reply.usage.cached_tokens) else {}),
            },
            "context": context,
            **(request or {}),
        }
        if len(calls) > self._max_calls:
            data[CALLS_RUN_KEY] = self._max_calls
        if not calls:
            judged = non_answer_of(reply.text, reply.finish_reason, tools_of(self._config))
            if judged is not None:
                data[NON_ANSWER_KEY] = str(judged.code)
                if judged.tools:
                    data[LOOKS_LIKE_KEY] = list(judged.tools)
        reply_item = NewItem(
            session_id=self._session_id,
            kind=ItemKind.ASSISTANT_MESSAGE,
            role="assistant",
            idempotency_key=inp.idempotency_key,
            text=reply.text,
            tokens=count_tokens(reply.text, encoding),
            data=data,
        )
        call_items = [
            NewItem(
                session_id=self._session_id,
                kind=ItemKind.TOOL_CALL,
                role="assistant",
                idempotency_key=f"{inp.idempotency_key}:call:{cid}",
                text=f"{call.name}",
                tokens=count_tokens(call.name + str(arguments[cid]), encoding),
                tool_call_id=cid,
                tool_name=call.name,
                data={
                    "arguments": arguments[cid],
                    "step": inp.step,
                    PROVIDER_ID_KEY: provider_id_to_keep(call.id),
                },
            )
            for cid, call in calls
        ]
        (row, _), *rows = await st.items.append_many([reply_item, *call_items])
        by_id = {cid: call_row for (cid, _), (call_row, _) in zip(calls, rows, strict=True)}
        for cid, call in calls[self._max_calls :]:
            await self._not_run(st, cid, call.name, len(calls))
            del by_id[cid]
        return row, by_id

    async def _not_run(self, st: AgentState, call_id: str, name: str, asked: int) -> None:
        """The result of a call past the cap, under the key the loop would have run it by."""
        words = (
            f"not run: a reply runs at most {self._max_calls} tool calls and this one asked "
            f"for {asked} (AGENT_MAX_CALLS_PER_REPLY); ask again for what still matters"
        )
        await commit_tool_result(
            st.db,
            st.tenant_id,
            ToolResult(
                session_id=self._session_id,
                tool_call_id=call_id,
                tool_name=name[:200],
                step=self._inp.step,
                idempotency_key=step_key(
                    activity.info().workflow_id or "", self._inp.step, call_id
                ),
                error_type=CALL_LIMIT_ERROR,
                error=words,
            ),
        )
