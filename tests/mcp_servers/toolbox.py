"""A real MCP server for the tests, written with the SDK's FastMCP.

    python -m tests.mcp_servers.toolbox stdio
    python -m tests.mcp_servers.toolbox http PORT

Every call appends {"tool", "key", "args", "pid"} to the JSON-lines file $MCP_RECORD,
`key` being the idempotency key the client sent in the request's `_meta`, so a test sees
what the server received (and how often) from outside the worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.types import ToolAnnotations

# A 1x1 PNG: the bytes a test checks were stored with their mime type.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
# How long `block` waits when it is the first call of its token: longer than any test.
BLOCK_SECONDS = 300

mcp = FastMCP("toolbox", host="127.0.0.1", log_level="WARNING")


def _record(tool: str, ctx: Context[Any, Any, Any], args: dict[str, Any]) -> int:
    """Append this call; returns how many calls of `tool` with these args came before."""
    meta = ctx.request_context.meta
    key = getattr(meta, "idempotency_key", None) if meta is not None else None
    path = Path(os.environ["MCP_RECORD"])
    before = 0
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            before += entry["tool"] == tool and entry["args"] == args
    with path.open("a") as out:
        entry = {"tool": tool, "key": key, "args": args, "pid": os.getpid()}
        out.write(json.dumps(entry) + "\n")
    return before


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def environment_names() -> list[str]:
    """The names of the environment variables this server was started with."""
    return sorted(os.environ)


# A deploy that changes a tool: $TOOLBOX_ECHO_DOC replaces echo's description.
@mcp.tool(
    description=os.environ.get("TOOLBOX_ECHO_DOC") or None,
    annotations=ToolAnnotations(readOnlyHint=True),
)
def echo(text: str, ctx: Context[Any, Any, Any]) -> str:
    """Return the text unchanged."""
    _record("echo", ctx, {"text": text})
    return f"echo: {text}"


@mcp.tool(annotations=ToolAnnotations(idempotentHint=True))
def make_report(title: str, lines: int, ctx: Context[Any, Any, Any]) -> dict[str, Any]:
    """Write a small report and return it as structured content."""
    _record("make_report", ctx, {"title": title, "lines": lines})
    return {"title": title, "body": [f"line {i}" for i in range(lines)]}


@mcp.tool()
def refuse(reason: str, ctx: Context[Any, Any, Any]) -> str:
    """Always fails with the reason (an isError result)."""
    _record("refuse", ctx, {"reason": reason})
    raise ValueError(f"refused: {reason}")


@mcp.tool()
def picture(ctx: Context[Any, Any, Any]) -> Image:
    """A tiny PNG image."""
    _record("picture", ctx, {})
    return Image(data=PNG, format="png")


# Idempotent under its key (both below): a retry of an interrupted call may run it again,
# which is what the crash and SIGKILL tests watch for; an effectful tool is not re-run.
@mcp.tool(annotations=ToolAnnotations(idempotentHint=True))
def crash(ctx: Context[Any, Any, Any]) -> str:
    """The server process dies mid-call, every time."""
    _record("crash", ctx, {})
    sys.stdout.flush()
    os._exit(3)


@mcp.tool(annotations=ToolAnnotations(idempotentHint=True))
async def block(token: str, ctx: Context[Any, Any, Any]) -> str:
    """The first call of a token blocks (until its client is killed); later ones return."""
    if _record("block", ctx, {"token": token}) == 0:
        await asyncio.sleep(BLOCK_SECONDS)
    return f"unblocked {token}"


def main(argv: list[str]) -> None:
    if argv[:1] == ["http"]:
        mcp.settings.port = int(argv[1])
        mcp.run("streamable-http")
    else:
        mcp.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
