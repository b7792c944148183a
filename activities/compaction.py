"""The compact_session activity: summarise the older part of a session's window through the
provider and store it as the next compaction version. Raw items stay; assembly then starts
from the summary. Idempotent: a retried or replayed call stores (and returns) one version."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.agent_catalog import AgentCatalog
from durable_agents.activities.context.assembly import ContextBudget, assemble_context
from durable_agents.activities.context.model_context import (
    BLOCK_STARTS,
    budget_of,
    summary_prompt,
    turn_config,
    window_items,
)
from durable_agents.activities.context_windows import ContextWindows
from durable_agents.activities.errors import storage_errors_are_final
from durable_agents.activities.heartbeat import heartbeating
from durable_agents.activities.model_wait import outage_aware
from durable_agents.activities.policies.pricing import PriceTable
from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelProvider,
    ModelReply,
    ModelRequest,
)
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.activities.providers.overflow import overflow_of
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.context_configs import ContextConfig
from durable_agents.storage.models import CompactionRow, ItemRow
from durable_agents.storage.usage import UsageRecord
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workflows.contracts import CompactInput, CompactionRef

SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation above for your own later use. Keep the task, decisions, "
    "facts learned, file names and artifact sha256 references, and what is still open. "
    "Be concise; this summary replaces the messages it covers."
)
# Share of the window kept verbatim after the cut: the most recent steps stay raw.
KEEP_RECENT_RATIO = 0.25


def cut_ordinal(items: list[ItemRow], keep_tokens: int) -> int | None:
    """The last ordinal to summarise: everything before the kept tail, never splitting a
    tool call from its result (the tail starts at a user or assistant message)."""
    kept = 0
    cut: int | None = None
    for item in reversed(items):
        kept += item.tokens
        if item.kind in BLOCK_STARTS:
            cut = item.ordinal - 1
            if kept >= keep_tokens:
                break
    return cut


class CompactionActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        provider: ModelProvider,
        current: ContextConfig,
        windows: ContextWindows | None = None,
        agents: AgentCatalog | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        """`provider`/`current`: the default agent's; `agents`: every agent this worker
        serves (ModelActivities.agents), each summarised through its own provider.
        `windows`: the model activities' (ModelActivities.windows), so a summary is
        asked for within the server's real window too. `prices`: what a summary's tokens
        cost (default: unpriced)."""
        self._sessions = sessions
        self._prices = prices or PriceTable()
        self._provider = provider
        self._current = current
        self._agents = agents
        self._windows = windows if windows is not None else ContextWindows()

    @activity.defn(name="compact_session")
    async def compact_session(self, inp: CompactInput) -> CompactionRef | None:
        """Store the next compaction, or None when there is nothing old enough to compact."""
        session_id = uuid.UUID(inp.session_id)
        outage = outage_aware(self._sessions, inp.tenant_id, session_id)
        async with outage, storage_errors_are_final(), heartbeating():
            # A worker's first model call may be this one (once per worker; never fails).
            await self._windows.discover(self._current.model)
            async with agent_state(self._sessions, inp.tenant_id, write=True) as st:
                done = await st.compactions.by_key(inp.idempotency_key)
                if done is not None:
                    return _ref(done)
                agent_name, provider, current = await self._agent_of(st, session_id)
                _, config = await turn_config(st, session_id, current)
                budget = self._windows.budget(config.model, budget_of(config))
                previous = await st.compactions.latest(session_id)
                window = await window_items(st, session_id, budget, previous)
            cut = cut_ordinal(window, int(budget.context_tokens * KEEP_RECENT_RATIO))
            floor = previous.covers_through_ordinal if previous else 0
            if cut is None or cut <= floor:
                return _ref(previous) if previous else None
            reply = await self._summarise(inp, provider, config, budget, previous, window, cut)
            summary = reply.text
            async with agent_state(self._sessions, inp.tenant_id, write=True) as st:
                # The session first, as a reply's commit takes it (then the spend rows):
                # taken the other way round, the two deadlocked.
                await st.sessions.lock(session_id)
                # A summary is a model reply too: its usage commits with it, under its key.
                await st.usage.record(
                    UsageRecord(
                        idempotency_key=inp.idempotency_key,
                        session_id=session_id,
                        agent=agent_name,
                        provider=provider.name,
                        model=config.model,
                        input_tokens=reply.usage.input_tokens,
                        output_tokens=reply.usage.output_tokens,
                        cached_tokens=reply.usage.cached_tokens,
                        cost_usd=self._prices.cost(provider.name, config.model, reply.usage),
                        purpose="compaction",
                    )
                )
                row, _ = await st.compactions.add(
                    session_id,
                    covers_through_ordinal=cut,
                    summary=summary,
                    summary_tokens=count_tokens(summary, budget.encoding),
                    model=config.model,
                    idempotency_key=inp.idempotency_key,
                )
                activity.logger.info(
                    "session %s compacted through item %d (v%d)", inp.session_id, cut, row.version
                )
                return _ref(row)

    async def _agent_of(
        self, st: AgentState, session_id: uuid.UUID
    ) -> tuple[str, ModelProvider, ContextConfig]:
        """The session's agent definition, and its provider and new-turn config."""
        session = await st.sessions.get(session_id)
        if self._agents is None:
            return session.agent_definition, self._provider, self._current
        agent = self._agents.get(session.agent_definition)
        return session.agent_definition, agent.provider, agent.config

    async def _summarise(
        self,
        inp: CompactInput,
        provider: ModelProvider,
        config: ContextConfig,
        budget: ContextBudget,
        previous: CompactionRow | None,
        window: list[ItemRow],
        cut: int,
    ) -> ModelReply:
        async def previews_only(_: uuid.UUID, __: int) -> tuple[bytes, str]:
            raise LookupError  # never called: the budget below leaves no room to expand

        context = await assemble_context(
            [i for i in window if i.ordinal <= cut],
            system_prompt=summary_prompt(config.system_prompt, previous),
            tools=[],
            budget=ContextBudget(
                context_tokens=budget.context_tokens,
                reply_tokens=budget.reply_tokens,
                tool_result_tokens=0,
                encoding=budget.encoding,
            ),
            fetch=previews_only,
        )
        messages = [*context.messages, ChatMessage("user", SUMMARY_INSTRUCTIONS)]
        try:
            reply = await provider.complete(
                ModelRequest(
                    model=config.model,
                    messages=messages,
                    tools=[],
                    idempotency_key=inp.idempotency_key,
                    max_output_tokens=budget.reply_tokens,
                    purpose="compaction",
                )
            )
        except ProviderError as err:
            overflow = overflow_of(err)
            if overflow is not None:
                # The error stays retryable: the retry is assembled within what was learned.
                sent = context.input_tokens + count_tokens(SUMMARY_INSTRUCTIONS, budget.encoding)
                self._windows.learn(config.model, overflow, sent, budget)
            raise
        return reply


def _ref(row: CompactionRow) -> CompactionRef:
    return CompactionRef(str(row.id), row.version, row.covers_through_ordinal)
