"""The call_model activity: assemble context from AgentState, call the provider, persist
only the reply (an assistant item plus one tool_call item per requested call)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.agent_catalog import AgentCatalog, AgentRuntime, default_runtime
from durable_agents.activities.answer_checks import declares_check
from durable_agents.activities.check_guide import with_guide
from durable_agents.activities.checks.spec import Check
from durable_agents.activities.context.assembly import AssembledContext, ContextBudget, pending_note
from durable_agents.activities.context.call_expected import call_required
from durable_agents.activities.context.model_context import (
    ConfigCache,
    assemble_for_step,
    budget_of,
    compaction_due,
    tools_of,
    turn_config,
)
from durable_agents.activities.context_windows import (
    ContextWindows,
    call_within_window,
    context_stats,
)
from durable_agents.activities.errors import non_retryable, storage_errors_are_final
from durable_agents.activities.gatekeeper import Gatekeeper
from durable_agents.activities.heartbeat import heartbeating
from durable_agents.activities.model_deltas import DeltaStream
from durable_agents.activities.model_wait import outage_aware
from durable_agents.activities.policies.admission import Admission
from durable_agents.activities.policies.pricing import PriceTable
from durable_agents.activities.policies.text_limits import TextLimits
from durable_agents.activities.providers.base import ModelProvider, ModelReply, ModelRequest, Usage
from durable_agents.activities.providers.request_fingerprint import (
    REQUEST_KEY,
    request_fingerprint,
)
from durable_agents.activities.replays import cassette_for, replayed_refs
from durable_agents.activities.reply_items import ReplyItems
from durable_agents.activities.tool_call_refs import tool_call_refs
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.mcp_servers import McpListingError
from durable_agents.activities.trajectory import ModelCallEvent, TrajectoryRecorder
from durable_agents.storage.admissions import MODEL, Reservation
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.artifact_cache import ArtifactReadCache
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.context_configs import ContextConfig
from durable_agents.storage.models import CompactionRow, ItemRow, SessionRow
from durable_agents.storage.replays import replay_mark
from durable_agents.storage.session_deltas import DeltaPublisher
from durable_agents.storage.usage import UsageRecord
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.vocabulary.non_answers import NON_ANSWER_KEY
from durable_agents.workflows.contracts import Closed, ModelCallInput, ModelCallResult


class ModelActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        provider: ModelProvider,
        registry: ToolRegistry,
        *,
        model: str,
        system_prompt: str,
        budget: ContextBudget,
        recorder: TrajectoryRecorder | None = None,
        read_cache: ArtifactReadCache | None = None,
        max_tool_argument_bytes: int = TextLimits.max_tool_argument_bytes,
        windows: ContextWindows | None = None,
        agents: AgentCatalog | None = None,
        deltas: DeltaPublisher | None = None,
        prices: PriceTable | None = None,
        gate: Gatekeeper | None = None,
        max_calls_per_reply: int = 16,
        workspace: WorkspaceLayout | None = None,
        agent_checks: Mapping[str, Check] | None = None,
    ) -> None:
        """`provider`, `registry`, `model`, `system_prompt` and `budget` describe the default
        agent; `agents`: every agent this worker serves (default: that one alone).
        `windows`: what the worker knows of its server's context window (shared with
        compaction); by default learned from overflow errors only. `deltas`: where the
        reply's text is published as it streams (None: providers do not stream).
        `prices`: what each reply's tokens cost (default: every model unpriced).
        `gate`: what admits each call (default: the kill switch and budgets, no quotas).
        `max_calls_per_reply`: the calls of one reply that run; the rest get a result
        saying so (a reply may ask for any number). `workspace`: where run_tool on this
        worker finds each session's files, which `exists:` approval policies look at
        (None: they ask). `agent_checks`: the check of each agent that declares one, as
        check_answer has them (those that guide run before each step); with them, an answer
        of a task without a check says so (`unchecked`) and the loop skips the check."""
        self._workspace = workspace
        self._agent_checks = agent_checks
        self._sessions = sessions
        self._gate = gate or Gatekeeper(sessions)
        self._max_calls = max_calls_per_reply
        self._prices = prices or PriceTable()
        self._deltas = deltas
        self._windows = windows if windows is not None else ContextWindows()
        self._max_argument_bytes = max_tool_argument_bytes
        self._store = store
        self._recorder = recorder or TrajectoryRecorder.noop()
        # Tool results re-expanded by every step are read from S3 once per worker.
        self._read_cache = read_cache if read_cache is not None else ArtifactReadCache()
        self._configs = ConfigCache()
        # What a new turn of each agent records; a turn under way keeps what it recorded.
        self._agents = agents or AgentCatalog(
            default_runtime(
                provider, registry, model=model, system_prompt=system_prompt, budget=budget
            )
        )

    @property
    def agents(self) -> AgentCatalog:
        return self._agents

    @property
    def current_config(self) -> ContextConfig:
        """What a new turn of the default agent records."""
        return self._agents.default.config

    @property
    def windows(self) -> ContextWindows:
        return self._windows

    @activity.defn(name="call_model")
    async def call_model(self, inp: ModelCallInput) -> ModelCallResult:
        """One model step. Retries after the reply was committed return the committed reply."""
        session_id = uuid.UUID(inp.session_id)
        outage = outage_aware(self._sessions, inp.tenant_id, session_id)
        async with outage, storage_errors_are_final(), heartbeating():
            # Reads, and at a turn's first step one UPDATE naming its config (whose rows are
            # content-addressed inserts, each complete by itself): no transaction needed.
            async with agent_state(self._sessions, inp.tenant_id, autocommit=True) as st:
                session = await st.sessions.get(session_id)
                agent = await self._agent_for(inp, session.agent_definition)
                config_id, config = await turn_config(st, session_id, agent.config, self._configs)
                done = await st.items.by_key(inp.idempotency_key)
                if done is not None:
                    return await self._result_of(st, inp, done, agent, config, session)
            closed = await self._admit(inp, session, agent, config)
            if closed is not None:
                return ModelCallResult(item_id="", ordinal=0, closed=closed)
            try:
                return await self._reply(inp, session_id, session, agent, (config_id, config))
            except BaseException:
                # The call ends without a counted reply: its reservation ends with it (a
                # retried attempt finds itself admitted and reserves again).
                await self._gate.settle(inp.tenant_id, inp.idempotency_key)
                raise

    async def _admit(
        self, inp: ModelCallInput, session: SessionRow, agent: AgentRuntime, config: ContextConfig
    ) -> Closed | None:
        """Pass the gate, reserving the most this call can use: its context budget (input
        and reply together) at the model's price."""
        budget = budget_of(config)
        most = Usage(budget.context_tokens - budget.reply_tokens, budget.reply_tokens)
        reservation = Reservation(
            budget.context_tokens, self._prices.cost(agent.provider.name, config.model, most)
        )
        request = Admission(
            MODEL,
            inp.idempotency_key,
            session,
            inp.budget,
            _uuid_or_none(inp.budget_session_id),
            reservation,
        )
        return (await self._gate.admit(inp.tenant_id, request)).closed

    async def _reply(
        self,
        inp: ModelCallInput,
        session_id: uuid.UUID,
        session: SessionRow,
        agent: AgentRuntime,
        turn: tuple[uuid.UUID | None, ContextConfig],
    ) -> ModelCallResult:
        """Assemble, call the provider (in a replay, the record first), and commit the reply
        with its usage and the fingerprint of the request it answers."""
        config_id, config = turn
        compaction: CompactionRow | None = None
        sent = ""
        mark, cassette = replay_mark(session), None
        if mark is not None:
            async with agent_state(self._sessions, inp.tenant_id, autocommit=True) as st:
                cassette = await cassette_for(st, mark, inp.step)
        pending = {
            p.tool_call_id: pending_note(p.device_id, p.step) for p in inp.pending_device_calls
        }

        async def assemble(budget: ContextBudget) -> AssembledContext:
            nonlocal compaction
            sized = replace(config, budget=asdict(budget))
            async with agent_state(self._sessions, inp.tenant_id, autocommit=True) as st:
                context, compaction = await assemble_for_step(  # reads only
                    st,
                    self._store,
                    session_id,
                    sized,
                    self._read_cache,
                    pending,
                )
            return context

        async def send(
            context: AssembledContext, budget: ContextBudget, overflows: int
        ) -> ModelReply:
            # A smaller request, its own key (stable): a vendor may refuse two bodies a key.
            nonlocal sent
            key = f"{inp.idempotency_key}:fit{overflows}" if overflows else inp.idempotency_key
            sink = self._delta_stream(inp, overflows)
            request = ModelRequest(
                model=config.model,
                messages=context.messages,
                tools=tools_of(config),
                idempotency_key=key,
                max_output_tokens=budget.reply_tokens,
                call_required=call_required(context.call_asked, agent.registry, tools_of(config)),
                withheld=context.withheld,
                on_text=sink,
            )
            sent = request_fingerprint(request)
            played = cassette.play(sent) if cassette is not None else None
            try:
                if played is not None:
                    return played
                root = self._workspace_of(inp.tenant_id, session)
                told = await with_guide(request, self._sessions, self._agent_checks, session, root)
                # No transaction is held open across the provider call.
                return await agent.provider.complete(told)
            finally:
                if sink is not None:
                    # Before the reply commits: a listener hears every delta first.
                    await sink.flush()

        event = self._event(inp, agent.provider.name, config.model)
        async with self._recorder.model_call(event) as trace:
            fitted = await call_within_window(
                self._windows, config.model, budget_of(config), tools_of(config), assemble, send
            )
            context, reply = fitted.context, fitted.reply
            await trace.replied(context.messages, reply)
            activity.logger.info(
                "model step %s: %d input tokens, %d expanded, %d truncated, %d tool calls",
                inp.step,
                context.input_tokens,
                context.expanded,
                context.truncated,
                len(reply.tool_calls),
            )
            stats = context_stats(self._windows, fitted, config.model, compaction)
            async with agent_state(self._sessions, inp.tenant_id, write=True) as st:
                served = {REQUEST_KEY: sent}
                if cassette is not None:
                    served |= await cassette.marks(st, config_id, self._configs)
                row, call_rows = await ReplyItems(
                    inp,
                    session_id,
                    config,
                    max_argument_bytes=self._max_argument_bytes,
                    max_calls=self._max_calls,
                ).commit(st, fitted, stats, served)
                # In the reply's transaction, under its key: counted once, or not at all;
                # the reservation it replaces ends with it.
                await self._count(st, inp, session.agent_definition, agent, config, reply)
                await st.admissions.settle(inp.idempotency_key)
                await trace.committed(st.db)  # audit mode: the event commits with the reply
                return await self._result_of(st, inp, row, agent, config, session, call_rows)

    async def _count(
        self,
        st: AgentState,
        inp: ModelCallInput,
        agent_name: str,
        agent: AgentRuntime,
        config: ContextConfig,
        reply: ModelReply,
    ) -> None:
        """The reply's usage as its provider reported it, priced by the configured model."""
        provider, usage = agent.provider.name, reply.usage
        await st.usage.record(
            UsageRecord(
                idempotency_key=inp.idempotency_key,
                session_id=uuid.UUID(inp.session_id),
                agent=agent_name,
                provider=provider,
                model=config.model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
                cost_usd=self._prices.cost(provider, config.model, usage),
                tool_calls=len(reply.tool_calls),
                budget_session_id=_uuid_or_none(inp.budget_session_id),
            )
        )

    def _delta_stream(self, inp: ModelCallInput, send: int) -> DeltaStream | None:
        if self._deltas is None:
            return None
        return DeltaStream(
            self._deltas,
            inp.tenant_id,
            inp.session_id,
            step=inp.step,
            attempt=activity.info().attempt,
            send=send,
        )

    async def _agent_for(self, inp: ModelCallInput, name: str) -> AgentRuntime:
        """The session's agent, with its device-local tools when the task has a device."""
        agent = self._agents.get(name)
        if inp.device_id is None or not agent.device_servers:
            return agent
        # Imported here: it loads the MCP SDK (~12 MiB a process), which only a task that
        # names a device with MCP servers needs.
        from durable_agents.activities.tools.mcp_device import registered_device_tools

        try:
            served = await registered_device_tools(
                self._sessions, inp.tenant_id, inp.device_id, agent.device_servers
            )
        except McpListingError:
            # What a device registers is untrusted; our words only (this reaches history).
            raise non_retryable(
                "DeviceToolsInvalid", "the device registered MCP tool specs that are refused"
            ) from None
        return agent.with_device_tools(served)

    def _event(self, inp: ModelCallInput, provider: str, model: str) -> ModelCallEvent:
        return ModelCallEvent(
            tenant_id=inp.tenant_id,
            session_id=inp.session_id,
            step=inp.step,
            provider=provider,
            model=model,
            idempotency_key=inp.idempotency_key,
        )

    async def _result_of(
        self,
        st: AgentState,
        inp: ModelCallInput,
        row: ItemRow,
        agent: AgentRuntime,
        config: ContextConfig,
        session: SessionRow,
        call_rows: dict[str, ItemRow] | None = None,
    ) -> ModelCallResult:
        """`call_rows`: the tool_call items when this attempt just wrote them. `config`: the
        turn's, whose agent approvals hold for the turn. `session.approvals`: what the
        session committed (the task's policies, and loosenings with who made them)."""
        calls = await tool_call_refs(
            st.items,
            row,
            agent,
            config.agent.get("approvals", {}),
            session.approvals or {},
            call_rows or {},
            self._workspace_of(inp.tenant_id, session),
        )
        mark = replay_mark(session)
        if mark is not None:
            calls = replayed_refs(calls, mark)
        stats = row.data.get("context", {})
        # Judged against the window the server really has, once it is known.
        budget = self._windows.budget(config.model, budget_of(config))
        return ModelCallResult(
            item_id=str(row.id),
            ordinal=row.ordinal,
            tool_calls=calls,
            context_tokens=int(stats.get("input_tokens", 0)),
            compaction_due=compaction_due(budget, stats),
            # Judged when the reply was committed: a retry returns the same judgement.
            non_answer=None if calls else row.data.get(NON_ANSWER_KEY),
            unchecked=not calls and not declares_check(self._agent_checks, session),
        )

    def _workspace_of(self, tenant_id: str, session: SessionRow) -> Path | None:
        """The session's workspace root for `exists:` approval policies to look at; None
        (they ask) without a layout, or while archive holds the files packed."""
        if self._workspace is None or session.workspace_sha256 is not None:
            return None
        return self._workspace.readable_root(tenant_id, session)


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(value)
