"""A user-defined effectful tool whose executions are counted OUTSIDE the system: each run
appends its idempotency key to a file no part of the engine reads or writes."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput

_SPEC_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "additionalProperties": False,
}


def executions(count_file: Path) -> Counter[str]:
    """How many times each idempotency key ran (from the count file)."""
    if not count_file.exists():
        return Counter()
    return Counter(line for line in count_file.read_text().splitlines() if line)


def _append(count_file: Path, key: str) -> None:
    # O_APPEND + fsync: the line is there even if the process dies right after.
    fd = os.open(count_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{key}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _output(key: str, how: str) -> ToolOutput:
    return ToolOutput(json.dumps({"bumped": key, "how": how}).encode(), "application/json")


def bump_tool(
    count_file: Path, *, name: str = "bump", hang_first: bool = False, reconciles: bool = False
) -> Tool:
    """`hang_first`: after its effect, a first run (not a re-run) blocks until the process
    is killed, so the kill lands between the effect and the commit. `reconciles`: the tool
    has a reconcile that looks its key up in the count file."""

    async def bump(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        await asyncio.to_thread(_append, count_file, ctx.idempotency_key)
        if hang_first and ":rerun" not in ctx.idempotency_key:
            await asyncio.Event().wait()  # the harness SIGKILLs the worker here
        return _output(ctx.idempotency_key, "ran")

    async def reconcile(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput | None:
        counted = await asyncio.to_thread(executions, count_file)
        return _output(ctx.idempotency_key, "reconciled") if counted[ctx.idempotency_key] else None

    spec = ToolSpec(name, "Bump a counter outside the system.", _SPEC_PARAMETERS)
    return Tool(spec, bump, effect="effectful", reconcile=reconcile if reconciles else None)
