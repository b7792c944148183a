"""MCP tools as our tools: model-facing names, bounded specs, effects, and results.

Everything here reads what an MCP server sent, which is untrusted: names, descriptions and
schemas are bounded (an absurd listing is refused, naming the server), and a result's
text, base64 and mime types are checked before they become a ToolOutput.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from mcp import types

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.tools.base import Effect, ToolError, ToolOutput
from durable_agents.activities.tools.mcp_servers import McpListingError, McpServer

# OpenAI's and Anthropic's function-name alphabet and length.
MODEL_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# Between server and tool in a model-facing name: '.' is not allowed there.
NAME_SEPARATOR = "__"
MAX_TOOLS_PER_SERVER = 128
MAX_MCP_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 2048
# A tool's schema is sent to the model on every step: a server cannot spend the context.
MAX_SCHEMA_BYTES = 32 * 1024
MAX_SCHEMA_DEPTH = 24
# What of a server's error text reaches the model (AgentState only, never history).
MAX_ERROR_CHARS = 2000
_MIME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}/[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}")
_TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class McpToolInfo:
    """One MCP tool as we offer it: its name on the server and what the model sees."""

    server: str
    mcp_name: str
    spec: ToolSpec
    effect: Effect

    @property
    def policy_names(self) -> tuple[str, ...]:
        """Approval-policy keys that apply to this tool, most specific first."""
        return (f"{self.server}.{self.mcp_name}", f"{self.server}.*")

    def record(self) -> dict[str, Any]:
        """What a device registers of this tool in AgentState (devices.tool_specs)."""
        return {
            "server": self.server,
            "mcp_name": self.mcp_name,
            "description": self.spec.description,
            "parameters": self.spec.parameters,
            "effect": self.effect,
        }


def model_name(server: str, tool: str) -> str:
    """`server__tool`, with characters a model API refuses replaced by '_'; a name over 64
    characters keeps its start and gains a hash of the full name, so it stays unique."""
    base = f"{server}{NAME_SEPARATOR}{re.sub(r'[^a-zA-Z0-9_-]', '_', tool)}"
    if len(base) <= 64 and base[len(server) + len(NAME_SEPARATOR) :] == tool:
        return base
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:10]
    return f"{base[:53]}_{digest}"


def _depth(schema: Any) -> int:
    """The nesting depth of a JSON value, without recursion (a server picks the depth)."""
    deepest, stack = 0, [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_SCHEMA_DEPTH:
            return depth
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _spec(server: McpServer, tool: types.Tool) -> ToolSpec:
    where = f"MCP server {server.name!r}, tool {tool.name[:MAX_MCP_NAME_CHARS]!r}"
    schema = tool.inputSchema
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise McpListingError(f"{where}: its input schema is not a JSON object schema")
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > MAX_SCHEMA_BYTES:
        raise McpListingError(
            f"{where}: its input schema is {size} bytes, more than {MAX_SCHEMA_BYTES}"
        )
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise McpListingError(f"{where}: its input schema nests deeper than {MAX_SCHEMA_DEPTH}")
    description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION_CHARS]
    return ToolSpec(model_name(server.name, tool.name), description, {"type": "object", **schema})


def _effect(server: McpServer, tool: types.Tool) -> Effect:
    """The declaration's override, else the tool's own hints; unannotated is effectful."""
    if tool.name in server.effects:
        return server.effects[tool.name]
    hints = tool.annotations
    if hints is not None and hints.readOnlyHint:
        return "read_only"
    if hints is not None and hints.idempotentHint:
        return "idempotent"
    return "effectful"


def tool_infos(server: McpServer, listed: list[types.Tool]) -> list[McpToolInfo]:
    """The tools of one server we offer, or McpListingError saying what is wrong."""
    if len(listed) > MAX_TOOLS_PER_SERVER:
        raise McpListingError(
            f"MCP server {server.name!r} lists {len(listed)} tools, more than "
            f"{MAX_TOOLS_PER_SERVER}"
        )
    names = {t.name for t in listed}
    missing = sorted(set(server.tools) - names)
    if missing:
        raise McpListingError(
            f"MCP server {server.name!r} has no tool named {missing[0][:MAX_MCP_NAME_CHARS]!r}"
        )
    infos: dict[str, McpToolInfo] = {}
    for tool in listed:
        if not 0 < len(tool.name) <= MAX_MCP_NAME_CHARS:
            raise McpListingError(
                f"MCP server {server.name!r} lists a tool name of {len(tool.name)} characters"
            )
        if server.tools and tool.name not in server.tools:
            continue
        info = McpToolInfo(server.name, tool.name, _spec(server, tool), _effect(server, tool))
        if (other := infos.get(info.spec.name)) is not None:
            raise McpListingError(
                f"MCP server {server.name!r}: tools {other.mcp_name!r} and {tool.name!r} "
                f"would both be offered as {info.spec.name!r}"
            )
        infos[info.spec.name] = info
    return list(infos.values())


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def _mime(value: str | None, default: str) -> str:
    return value if value and _MIME_RE.fullmatch(value) else default


def _bytes(data: str, server: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(
            "McpBadResult", f"MCP server {server!r} sent binary content that is not base64"
        ) from None


def _binary(block: types.ContentBlock, server: str) -> ToolOutput | None:
    """A block that is one binary object: its bytes with its mime type."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        mime = _mime(block.mimeType, "application/octet-stream")
        return ToolOutput(_bytes(block.data, server), mime)
    if isinstance(block, types.EmbeddedResource) and isinstance(
        block.resource, types.BlobResourceContents
    ):
        mime = _mime(block.resource.mimeType, "application/octet-stream")
        return ToolOutput(_bytes(block.resource.blob, server), mime)
    return None


def _placeholder(what: str, mime: str | None, data: str) -> str:
    """A binary block beside text: described (about its decoded size), not inlined."""
    return f"[{what} {_mime(mime, 'of unknown type')}, about {len(data) * 3 // 4} bytes]"


def _text_of(block: types.ContentBlock) -> str:
    """A block as text the model can read; binary blocks are described, not inlined."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return _placeholder(block.type, block.mimeType, block.data)
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return res.text
        return _placeholder(f"resource {res.uri}", res.mimeType, res.blob)
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri} {_mime(block.mimeType, '')}]".replace(" ]", "]")
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _wrapped_text(result: types.CallToolResult) -> str | None:
    """The text of a result that is one string wrapped as {"result": text}, else None."""
    structured = result.structuredContent
    if not isinstance(structured, dict) or set(structured) != {"result"}:
        return None
    value = structured["result"]
    blocks = result.content
    if (
        not isinstance(value, str)
        or len(blocks) != 1
        or not isinstance(blocks[0], types.TextContent)
    ):
        return None
    return value if blocks[0].text == value else None


def output_of(server: str, result: types.CallToolResult) -> ToolOutput:
    """A tools/call result as a ToolOutput; an isError result raises ToolError."""
    if result.isError:
        text = "\n".join(_text_of(b) for b in result.content).strip()
        raise ToolError("McpToolError", _bounded(text) or "the tool reported an error")
    if _wrapped_text(result) is not None:
        # FastMCP wraps a function's non-object return value as {"result": value} and
        # repeats it as text: the text is the result, the wrapper an artefact of the SDK.
        return ToolOutput(str(_wrapped_text(result)).encode(), _TEXT)
    if result.structuredContent is not None:
        # The spec asks servers to repeat structured content as text for old clients:
        # the JSON is the whole result, the text a copy.
        body = json.dumps(result.structuredContent, ensure_ascii=False).encode()
        return ToolOutput(body, "application/json")
    if len(result.content) == 1 and (binary := _binary(result.content[0], server)) is not None:
        return binary
    if not result.content:
        return ToolOutput(b"[the tool returned no content]", _TEXT)
    return ToolOutput("\n".join(_text_of(b) for b in result.content).encode(), _TEXT)
