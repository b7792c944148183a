"""Reading what a model step needs from AgentState: the turn's recorded configuration, the
latest compaction, and the window of items after it. Shared by call_model and compaction."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import TypeVar

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection

from durable_agents.activities.context.assembly import (
    AssembledContext,
    ContextBudget,
    assemble_context,
)
from durable_agents.activities.context.call_expected import call_asked, withheld_tools
from durable_agents.activities.providers.base import ToolSpec
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.artifact_cache import ArtifactReadCache
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.context_configs import ContextConfig, ContextConfigRepository
from durable_agents.storage.models import CompactionRow, ItemRow
from durable_agents.vocabulary.item_kinds import ItemKind

# Kinds that begin a block of the conversation (see context._blocks): a window that began
# after one would hold results whose call it lacks, and assembly would drop them unseen.
BLOCK_STARTS = (ItemKind.USER_MESSAGE, ItemKind.ASSISTANT_MESSAGE)

K = TypeVar("K")
V = TypeVar("V")


def config_of(
    provider: str, model: str, system_prompt: str, tools: list[ToolSpec], budget: ContextBudget
) -> ContextConfig:
    return ContextConfig(
        provider=provider,
        model=model,
        system_prompt=system_prompt,
        tool_schemas=[asdict(t) for t in tools],
        budget=asdict(budget),
    )


def budget_of(config: ContextConfig) -> ContextBudget:
    known = ContextBudget.__dataclass_fields__
    return ContextBudget(**{k: v for k, v in config.budget.items() if k in known})


def tools_of(config: ContextConfig) -> list[ToolSpec]:
    return [ToolSpec(**t) for t in config.tool_schemas]


class ConfigCache:
    """Recorded context configs by (tenant, id). A recorded config never changes (its row
    is named by the sha256 of its content), so a worker loads each one once. Also the id
    each agent's current config was recorded under, so the first step of every turn does
    not hash and insert it again (rows of context_configs are never deleted)."""

    def __init__(self, entries: int = 1_024) -> None:
        self._entries = entries
        self._known: OrderedDict[tuple[str, uuid.UUID], ContextConfig] = OrderedDict()
        # By the identity of the agent's config object, which is kept to check it.
        self._recorded: OrderedDict[tuple[str, int], tuple[ContextConfig, uuid.UUID]] = (
            OrderedDict()
        )

    async def load(
        self, configs: ContextConfigRepository, tenant_id: str, config_id: uuid.UUID
    ) -> ContextConfig:
        key = (tenant_id, config_id)
        known = self._known.get(key)
        if known is not None:
            self._known.move_to_end(key)
            return known
        loaded = await configs.load(config_id)
        self._keep(self._known, key, loaded)
        return loaded

    async def record(self, st: AgentState, config: ContextConfig) -> uuid.UUID:
        """The id `config` is recorded under, recording it in `st`'s unit of work when this
        worker has not seen it committed yet."""
        db = st.db
        key = (st.tenant_id, id(config))
        hit = self._recorded.get(key)
        if hit is not None and hit[0] is config:
            self._recorded.move_to_end(key)
            return hit[1]
        config_id = await st.configs.record(config)
        if _autocommits(await db.connection()):
            self._keep(self._recorded, key, (config, config_id))  # committed already
        elif self._entries > 0:
            # Only once committed: a rolled-back unit of work leaves no row to point at.
            event.listen(
                db.sync_session,
                "after_commit",
                lambda _: self._keep(self._recorded, key, (config, config_id)),
                once=True,
            )
        return config_id

    def _keep(self, entries: OrderedDict[K, V], key: K, value: V) -> None:
        if self._entries > 0:
            entries[key] = value
            entries.move_to_end(key)
            if len(entries) > self._entries:
                entries.popitem(last=False)


def _autocommits(conn: AsyncConnection) -> bool:
    """Whether each statement on `conn` commits by itself (durable_agents.storage.db.autocommit)."""
    sync = conn.sync_connection
    return sync is not None and sync.get_execution_options().get("isolation_level") == "AUTOCOMMIT"


async def turn_config(
    st: AgentState,
    session_id: uuid.UUID,
    current: ContextConfig,
    cache: ConfigCache | None = None,
) -> tuple[uuid.UUID | None, ContextConfig]:
    """The latest turn's recorded config; the first step of a turn records `current`."""
    cache = cache or ConfigCache(0)
    turn = await st.turns.latest(session_id)
    if turn is None:
        return None, current
    config_id = turn.context_config_id
    if config_id is None:
        config_id = await st.turns.set_config(turn.id, await cache.record(st, current))
    return config_id, await cache.load(st.configs, st.tenant_id, config_id)


def preview_budget(budget: ContextBudget) -> int:
    """Previews may fill half the window; the other half is for expanding the newest results."""
    return budget.context_tokens // 2


def compaction_due(budget: ContextBudget, stats: dict[str, int]) -> bool:
    """Compact before the previews since the last compaction outgrow their half of the
    window (older items would silently fall out of it). `stats`: a reply's context stats."""
    if "preview_tokens" in stats:
        return stats["preview_tokens"] >= preview_budget(budget) * budget.compact_at_ratio
    # Replies committed before preview_tokens was recorded: judge by what was sent.
    return stats.get("input_tokens", 0) >= budget.context_tokens * budget.compact_at_ratio


def summary_prompt(system_prompt: str, compaction: CompactionRow | None) -> str:
    if compaction is None:
        return system_prompt
    return (
        f"{system_prompt}\n\nSummary of the conversation so far (compaction "
        f"v{compaction.version}, items 1-{compaction.covers_through_ordinal}):\n"
        f"{compaction.summary}"
    )


async def window_items(
    st: AgentState,
    session_id: uuid.UUID,
    budget: ContextBudget,
    compaction: CompactionRow | None,
) -> list[ItemRow]:
    """Items after the latest compaction that fit the window, plus the task itself if no
    compaction has summarised it yet."""
    items = st.items
    after = compaction.covers_through_ordinal if compaction else 0
    window = await items.window(
        session_id, after_ordinal=after, token_budget=preview_budget(budget), starts=BLOCK_STARTS
    )
    # Ordinals start at 1: a window that begins there holds the task already.
    if compaction is None and not (window and window[0].ordinal <= 1):
        task = await items.first_of_kind(session_id, ItemKind.USER_MESSAGE)
        if task is not None and (not window or task.ordinal < window[0].ordinal):
            window.insert(0, task)
    return window


async def assemble_for_step(
    st: AgentState,
    store: ArtifactStore,
    session_id: uuid.UUID,
    config: ContextConfig,
    cache: ArtifactReadCache | None = None,
    pending: Mapping[str, str] | None = None,
) -> tuple[AssembledContext, CompactionRow | None]:
    """`cache`: the worker's artifact read cache (None: read every expansion from S3);
    `pending`: notes for device calls still running (assemble_context)."""
    budget = budget_of(config)
    tenant_id = st.tenant_id
    compaction = await st.compactions.latest(session_id)
    rows = await window_items(st, session_id, budget, compaction)
    artifacts = st.artifacts
    cache = cache if cache is not None else ArtifactReadCache(0)

    async def fetch(artifact_id: uuid.UUID, max_bytes: int) -> tuple[bytes, str]:
        known = cache.lookup(tenant_id, artifact_id, max_bytes)
        if known is not None:
            return known
        row = await artifacts.get(artifact_id)
        ref = store.ref_for(tenant_id, row.sha256, row.size_bytes, row.content_type)
        if row.size_bytes > max_bytes:
            # An excerpt for the model: a ranged read, not hash-checked (get() is, for resume).
            data = await store.get_range(tenant_id, ref, 0, max_bytes - 1)
        else:
            data = await store.get(tenant_id, ref)
        cache.keep(
            tenant_id, artifact_id, data, row.content_type, complete=len(data) == row.size_bytes
        )
        return data, row.content_type

    context = await assemble_context(
        rows,
        system_prompt=summary_prompt(config.system_prompt, compaction),
        tools=tools_of(config),
        budget=budget,
        fetch=fetch,
        pending=pending,
    )
    asked = call_asked(rows)
    return replace(context, call_asked=asked, withheld=withheld_tools(rows)), compaction
