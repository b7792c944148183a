"""The same ReAct workload on LangGraph + PostgresSaver, for bench/compare_loops.py.

A fake model node (one tool call per turn, then an answer) and a tool node returning R bytes
of seeded text; messages accumulate with `add_messages` (MessagesState) and every super-step
is checkpointed by AsyncPostgresSaver into the stack's PostgreSQL.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Durability
from naive_temporal import seeded_text


def psycopg_url(sqlalchemy_url: str) -> str:
    """postgresql+asyncpg://... -> postgresql://... (what psycopg accepts)."""
    return sqlalchemy_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def build_graph(calls: int, size: int, repeat: bool, model_starts: list[float]) -> StateGraph:
    async def model(state: MessagesState) -> dict[str, Any]:
        model_starts.append(time.perf_counter())
        turn = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        if turn >= calls:
            return {"messages": [AIMessage(content="Done.")]}
        call = {"name": "read", "args": {"index": turn}, "id": f"call_{turn}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    async def tools(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(
                    content=seeded_text(c["args"]["index"], size, repeat=repeat),
                    tool_call_id=c["id"],
                )
                for c in last.tool_calls
            ]
        }

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph


async def setup_langgraph(database_url: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(psycopg_url(database_url)) as saver:
        await saver.setup()


async def run_langgraph(
    database_url: str,
    thread_id: str,
    calls: int,
    size: int,
    repeat: bool,
    model_starts: list[float],
    durability: Durability = "sync",
) -> int:
    """Run the loop to the end; returns the number of messages in the final state.

    durability "sync" (our default here) persists each step before the next starts, like a
    Temporal loop; LangGraph's own default is "async" (persist while the next step runs).
    """
    async with AsyncPostgresSaver.from_conn_string(psycopg_url(database_url)) as saver:
        await saver.setup()
        app = build_graph(calls, size, repeat, model_starts).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * calls + 10}
        start = {"messages": [HumanMessage("Read everything.")]}
        final = await app.ainvoke(start, config, durability=durability)
        return len(final["messages"])
