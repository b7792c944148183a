"""What another device sees of a session: its place in the tree, turns with the context
config each used, compactions, a page of items and the artifacts they reference."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.archive import rehydrate_for_read
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.models import (
    ArtifactRow,
    CompactionRow,
    ContextConfigRow,
    ItemRow,
    SessionRow,
    TurnRow,
)
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus, shown_status
from durable_agents.workers.client.render import timeline_table
from durable_agents.workers.client.watch.wait_status import wait_line


@dataclass
class SessionView:
    session: SessionRow
    tree: list[SessionRow]
    turns: list[TurnRow]
    configs: dict[uuid.UUID, ContextConfigRow]
    compactions: list[CompactionRow]
    items: list[ItemRow]
    artifacts: list[ArtifactRow]
    next_after: int | None


async def load_view(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: uuid.UUID,
    *,
    after: int = 0,
    limit: int = 200,
    store: ArtifactStore | None = None,
) -> SessionView:
    """What `agentctl show` prints; an archived session is rehydrated first (needs `store`)."""
    async with agent_state(sessions, tenant_id) as st:
        row = await st.sessions.get(session_id)
        if row.status == SessionStatus.ARCHIVED:
            await rehydrate_for_read(sessions, store, tenant_id, session_id)
            await st.db.refresh(row)
        tree = await st.sessions.tree(row.root_id or row.id)
        turns = await st.turns.for_session(session_id)
        config_ids = {t.context_config_id for t in turns if t.context_config_id}
        got = [await st.db.get(ContextConfigRow, (tenant_id, i)) for i in config_ids]
        configs = {c.id: c for c in got if c}
        compactions = await st.compactions.for_session(session_id)
        page = await st.items.page(session_id, after_ordinal=after, limit=limit + 1)
        more = len(page) > limit
        items = page[:limit]
        found = await st.artifacts.get_many(i.artifact_id for i in items if i.artifact_id)
        return SessionView(
            session=row,
            tree=tree,
            turns=turns,
            configs={k: v for k, v in configs.items() if v.tenant_id == tenant_id},
            compactions=compactions,
            items=items,
            # Rows written in one transaction share a time: the id orders them the same
            # before and after an archive round trip.
            artifacts=sorted(found.values(), key=lambda a: (a.created_at, str(a.artifact_id))),
            next_after=items[-1].ordinal if more and items else None,
        )


def _tree(view: SessionView) -> Tree:
    by_parent: dict[uuid.UUID | None, list[SessionRow]] = {}
    for s in view.tree:
        by_parent.setdefault(s.parent_id, []).append(s)
    root = next((s for s in view.tree if s.parent_id is None), view.session)

    def label(s: SessionRow) -> str:
        here = " ◀" if s.id == view.session.id else ""
        return f"{s.id} · {agent_label(s)} · {s.status} · {s.title[:40]}{here}"

    top = Tree(label(root))

    def add(node: Tree, parent: SessionRow) -> None:
        for child in by_parent.get(parent.id, []):
            add(node.add(label(child)), child)

    add(top, root)
    return top


def _agent_of(c: ContextConfigRow | None) -> str:
    """The agent a turn's config was recorded for: its name and fingerprint prefix."""
    if c is None or not c.agent:
        return "-"
    return f"{c.agent.get('name', '?')} {str(c.agent.get('sha256', ''))[:12]}"


def agent_label(s: SessionRow) -> str:
    """The agent definition a session runs, and a sub-agent's own name after a slash."""
    if s.agent_name in ("agent", s.agent_definition):
        return s.agent_definition
    return f"{s.agent_definition}/{s.agent_name}"


def render_view(view: SessionView) -> RenderableType:
    s = view.session
    parts: list[RenderableType] = [
        f"session {s.id} · tenant {s.tenant_id} · agent {agent_label(s)} · {s.status}",
        f"workflow {s.workflow_id} run {s.workflow_run_id or '-'} · "
        f"created {s.created_at:%Y-%m-%d %H:%M:%S} · updated {s.updated_at:%Y-%m-%d %H:%M:%S}",
    ]
    waiting = wait_line(s)
    if waiting:
        parts.append(Text(waiting))
    if len(view.tree) > 1:
        parts.append(_tree(view))
    turns = Table(title="turns")
    columns = ("turn", "from #", "agent", "provider", "model", "prompt", "tools", "context tokens")
    for col in columns:
        turns.add_column(col, no_wrap=True)
    for t in view.turns:
        c: ContextConfigRow | None = (
            view.configs.get(t.context_config_id) if t.context_config_id else None
        )
        turns.add_row(
            str(t.turn_no),
            str(t.first_ordinal),
            _agent_of(c),
            c.provider if c else "-",
            c.model if c else "-",
            c.system_prompt_sha256[:12] if c else "-",
            c.tool_schemas_sha256[:12] if c else "-",
            str(c.budget.get("context_tokens", "-")) if c else "-",
        )
    parts.append(turns)
    window = _window_line(view.items)
    if window:
        parts.append(window)
    if view.compactions:
        comp = Table(title="compactions")
        for col in ("version", "covers items", "summary tokens", "model"):
            comp.add_column(col, no_wrap=True)
        for version in view.compactions:
            comp.add_row(
                str(version.version),
                f"1-{version.covers_through_ordinal}",
                str(version.summary_tokens),
                version.model,
            )
        parts.append(comp)
    parts.append(timeline_table(s, view.items))
    if view.next_after is not None:
        parts.append(f"more items: agentctl show {s.id} --after {view.next_after}")
    if view.artifacts:
        arts = Table(title="artifacts in this page")
        for col in ("artifact id", "sha256", "bytes", "type"):
            arts.add_column(col, no_wrap=True)
        for a in view.artifacts:
            arts.add_row(str(a.artifact_id), a.sha256[:16], str(a.size_bytes), a.content_type)
        parts.append(arts)
    return Group(*parts)


def _window_line(items: list[ItemRow]) -> str | None:
    """The model server's window as the newest step in the page knew it, when it was not
    simply the configured budget (activities/context_windows.py records it)."""
    for item in reversed(items):
        window = (item.data.get("context") or {}).get("window") if item.data else None
        if item.kind != ItemKind.ASSISTANT_MESSAGE or not window:
            continue
        if window.get("source") == "setting" and not window.get("overflow_retries"):
            return None
        server = window.get("server_tokens")
        said = f"{server} tokens" if server else "size not stated"
        return (
            f"model server window: {said} (from {window.get('source')}); step budget "
            f"{window.get('budget_tokens')} tokens, reply {window.get('reply_tokens')}, "
            f"{window.get('overflow_retries', 0)} overflow retries"
        )
    return None


# Columns kept whole at any width a table fits: an id or a status cut short says nothing.
_WHOLE = ("session", "status", "updated")


def sessions_table(rows: list[SessionRow]) -> Table:
    """The sessions, one line each; on a narrow terminal the agent, parent and task text
    give way (cut with an ellipsis), never the id, status or time."""
    table = Table(title="sessions")
    for col in ("session", "status", "agent", "parent", "updated", "title"):
        table.add_column(col, no_wrap=col in _WHOLE)
    for r in rows:
        table.add_row(
            str(r.id),
            shown_status(r.status, r.checked),
            _one_line(agent_label(r)),
            _one_line(str(r.parent_id or "")),
            f"{r.updated_at:%Y-%m-%d %H:%M:%S}",
            _one_line(r.title[:50]),
        )
    return table


def _one_line(text: str) -> Text:
    # A column that may shrink wraps its cells; this cell stays one line and ends in "…".
    return Text(text, no_wrap=True, overflow="ellipsis")
