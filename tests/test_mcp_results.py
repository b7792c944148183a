"""What an MCP tools/call result becomes: the bytes and content type stored as the call's
artifact, or a bounded error the model reads. The server is untrusted: bad base64 and odd
mime types are refused or replaced."""

from __future__ import annotations

import base64
import json

import pytest
from mcp import types

from durable_agents.activities.tools.base import ToolError
from durable_agents.activities.tools.mcp_tools import MAX_ERROR_CHARS, output_of
from tests.mcp_servers.toolbox import PNG

PNG64 = base64.b64encode(PNG).decode()


def _result(*content: types.ContentBlock, **fields: object) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), **fields)


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def test_text_blocks_are_joined_as_utf8_text() -> None:
    out = output_of("s", _result(_text("one"), _text("twö")))
    assert out.content == "one\ntwö".encode() and out.content_type.startswith("text/plain")


def test_structured_content_is_the_json_result() -> None:
    out = output_of("s", _result(_text('{"a": 1}'), structuredContent={"a": 1, "b": ["x"]}))
    assert json.loads(out.content) == {"a": 1, "b": ["x"]}
    assert out.content_type == "application/json"


def test_a_string_fastmcp_wrapped_as_result_is_stored_as_its_text() -> None:
    out = output_of("s", _result(_text("ship it"), structuredContent={"result": "ship it"}))
    assert (out.content, out.content_type) == (b"ship it", "text/plain; charset=utf-8")
    # Anything more than that wrapper stays the structured JSON.
    for structured, text in (({"result": "a", "b": 1}, "a"), ({"result": "a"}, "other")):
        out = output_of("s", _result(_text(text), structuredContent=structured))
        assert out.content_type == "application/json" and json.loads(out.content) == structured


def test_a_lone_image_or_blob_is_stored_as_its_bytes_with_its_mime_type() -> None:
    image = types.ImageContent(type="image", data=PNG64, mimeType="image/png")
    out = output_of("s", _result(image))
    assert (out.content, out.content_type) == (PNG, "image/png")
    blob = types.BlobResourceContents(uri="file:///a.pdf", blob=PNG64, mimeType="application/pdf")
    out = output_of("s", _result(types.EmbeddedResource(type="resource", resource=blob)))
    assert (out.content, out.content_type) == (PNG, "application/pdf")


def test_binary_beside_text_is_described_not_inlined() -> None:
    image = types.ImageContent(type="image", data=PNG64, mimeType="image/png")
    out = output_of("s", _result(_text("chart:"), image))
    assert out.content.decode().startswith("chart:\n[image image/png, about ")
    assert PNG64 not in out.content.decode()


def test_bad_base64_and_odd_mime_types_from_a_server_are_not_trusted() -> None:
    bad = types.ImageContent(type="image", data="not base64!", mimeType="image/png")
    with pytest.raises(ToolError) as err:
        output_of("s", _result(bad))
    assert err.value.error_type == "McpBadResult"
    odd = types.ImageContent(type="image", data=PNG64, mimeType="text/html\r\nX-Evil: 1")
    assert output_of("s", _result(odd)).content_type == "application/octet-stream"


def test_an_is_error_result_is_a_bounded_tool_error() -> None:
    with pytest.raises(ToolError) as err:
        output_of("s", _result(_text("x" * 100_000), isError=True))
    assert err.value.error_type == "McpToolError"
    assert len(err.value.message) == MAX_ERROR_CHARS
    with pytest.raises(ToolError, match="reported an error"):
        output_of("s", _result(isError=True))
